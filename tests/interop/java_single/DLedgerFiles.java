// Opens a DLedger store directory with stock dledger 0.3.1.2's own DLedgerMmapFileStore
// (tests/interop/test_stock_dledger_files.py), prints what it recovered as JSON lines, and
// optionally appends entries as a follower before persisting. Run with the source launcher:
//   java -cp <classpath> DLedgerFiles.java <storeBaseDir> <selfId> <dataFileSize> <appendCount>
import io.openmessaging.storage.dledger.DLedgerConfig;
import io.openmessaging.storage.dledger.MemberState;
import io.openmessaging.storage.dledger.entry.DLedgerEntry;
import io.openmessaging.storage.dledger.store.file.DLedgerMmapFileStore;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.util.Base64;

public class DLedgerFiles {
    public static void main(String[] args) throws Exception {
        DLedgerConfig config = new DLedgerConfig();
        config.setStoreBaseDir(args[0]);
        config.setSelfId(args[1]);
        config.setGroup("g");
        config.setPeers(args[1] + "-127.0.0.1:1");
        config.setMappedFileSizeForEntryData(Integer.parseInt(args[2]));
        int appendCount = Integer.parseInt(args[3]);
        MemberState state = new MemberState(config);
        DLedgerMmapFileStore store = new DLedgerMmapFileStore(config, state);
        store.load();
        store.recover();
        System.out.println("{\"term\":" + state.currTerm() + ",\"vote\":\"" + state.currVoteFor()
            + "\",\"begin\":" + store.getLedgerBeginIndex() + ",\"end\":" + store.getLedgerEndIndex()
            + ",\"endTerm\":" + store.getLedgerEndTerm() + ",\"committed\":" + store.getCommittedIndex()
            + ",\"committedPos\":" + store.getCommittedPos() + ",\"wrote\":" + store.getWritePos() + "}");
        for (long i = store.getLedgerBeginIndex(); i >= 0 && i <= store.getLedgerEndIndex(); i++) {
            DLedgerEntry e = store.get(i);
            System.out.println("{\"index\":" + e.getIndex() + ",\"term\":" + e.getTerm() + ",\"pos\":"
                + e.getPos() + ",\"size\":" + e.getSize() + ",\"body\":\""
                + Base64.getEncoder().encodeToString(e.getBody()) + "\"}");
        }
        if (appendCount > 0) {
            // appendAsFollower needs a follower of some leader in the current term.
            Field role = MemberState.class.getDeclaredField("role");
            role.setAccessible(true);
            role.set(state, MemberState.Role.FOLLOWER);
            Field leader = MemberState.class.getDeclaredField("leaderId");
            leader.setAccessible(true);
            leader.set(state, "x");
            for (int k = 0; k < appendCount; k++) {
                byte[] body = new byte[200 + k * 37];
                for (int j = 0; j < body.length; j++) {
                    body[j] = (byte) (k * 7 + j);
                }
                DLedgerEntry e = new DLedgerEntry();
                e.setBody(body);
                e.setIndex(store.getLedgerEndIndex() + 1);
                e.setTerm(state.currTerm());
                e.setMagic(DLedgerMmapFileStore.CURRENT_MAGIC);
                e.setPos(store.getDataFileList().preAppend(DLedgerEntry.BODY_OFFSET + body.length));
                e.computeSizeInBytes();
                store.appendAsFollower(e, state.currTerm(), "x");
            }
            store.updateCommittedIndex(state.currTerm(), store.getLedgerEndIndex());
            store.flush();
            Method persist = DLedgerMmapFileStore.class.getDeclaredMethod("persistCheckPoint");
            persist.setAccessible(true);
            persist.invoke(store);
        }
        System.out.flush();
        System.exit(0); // the store's service threads take 10 s each to shut down
    }
}
