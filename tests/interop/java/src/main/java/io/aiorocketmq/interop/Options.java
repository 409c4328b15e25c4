package io.aiorocketmq.interop;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * {@code --name value} pairs and bare {@code --flag}s (true). Every option a scenario reads is
 * recorded, so that {@link #rejectUnused()} can turn a misspelt option into an error instead of a
 * silently ignored one.
 */
final class Options {
    final String scenario;
    private final Map<String, String> values = new HashMap<>();
    private final Set<String> used = new HashSet<>();

    Options(String[] args) {
        if (args.length == 0 || args[0].startsWith("--")) {
            throw new IllegalArgumentException("usage: Driver <scenario> --namesrv HOST:PORT [--option value]...");
        }
        scenario = args[0];
        for (int i = 1; i < args.length; i++) {
            String a = args[i];
            if (!a.startsWith("--")) {
                throw new IllegalArgumentException("unexpected argument: " + a);
            }
            String name = a.substring(2);
            if (i + 1 < args.length && !args[i + 1].startsWith("--")) {
                values.put(name, args[++i]);
            } else {
                values.put(name, "true");
            }
        }
    }

    String str(String name, String dflt) {
        used.add(name);
        return values.getOrDefault(name, dflt);
    }

    String required(String name) {
        String v = str(name, null);
        if (v == null || v.isEmpty()) {
            throw new IllegalArgumentException("--" + name + " is required for " + scenario);
        }
        return v;
    }

    int integer(String name, int dflt) {
        String v = str(name, null);
        return v == null ? dflt : Integer.parseInt(v);
    }

    long lng(String name, long dflt) {
        String v = str(name, null);
        return v == null ? dflt : Long.parseLong(v);
    }

    boolean flag(String name) {
        String v = str(name, "false");
        return Boolean.parseBoolean(v);
    }

    /** A comma-separated list; empty string -> empty list. */
    List<String> list(String name, String dflt) {
        String v = str(name, dflt);
        List<String> out = new ArrayList<>();
        if (v != null && !v.isEmpty()) {
            for (String s : v.split(",", -1)) {
                out.add(s);
            }
        }
        return out;
    }

    /** {@code k=v;k2=v2} (';' between pairs so values may hold commas). */
    Map<String, String> pairs(String name) {
        Map<String, String> out = new LinkedHashMap<>();
        String v = str(name, "");
        if (!v.isEmpty()) {
            for (String p : v.split(";")) {
                int eq = p.indexOf('=');
                if (eq <= 0) {
                    throw new IllegalArgumentException("--" + name + ": expected k=v;k2=v2, got " + v);
                }
                out.put(p.substring(0, eq), p.substring(eq + 1));
            }
        }
        return out;
    }

    void rejectUnused() {
        Set<String> unknown = new HashSet<>(values.keySet());
        unknown.removeAll(used);
        if (!unknown.isEmpty()) {
            throw new IllegalArgumentException("unknown option(s) for " + scenario + ": " + unknown);
        }
    }
}
