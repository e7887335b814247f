package kreplica.agent;

import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The events file: one JSON object per line, each written with one unbuffered
 * {@code FileOutputStream.write} of the whole line to a file opened in append mode, so a kill -9
 * loses nothing already written, and a restarted broker appends after its earlier lines.
 *
 * <p>This class names no Kafka type: premain uses it before the transformer is installed, and
 * loading it must not load (and so freeze, untransformed) any Kafka class.
 */
public final class Sink {
    private Sink() {}

    static volatile boolean open;
    static FileOutputStream out;
    static final Object LOCK = new Object();
    static int broker;
    static String topic;
    static int partition;
    static String kafkaVersion;
    static final AtomicLong SEQ = new AtomicLong();
    static final AtomicLong ERRORS = new AtomicLong();
    static final Map<String, Integer> INSTALLED = new LinkedHashMap<>();

    /** At most this many agent-error lines per JVM (all are counted). */
    static final int MAX_ERROR_LINES = 200;

    /** Open the file and write the header line. */
    static void open(String path, int brokerId, String topicName, int partitionId, String version,
            List<Agent.Hook> hooks) throws IOException {
        out = new FileOutputStream(path, true);
        broker = brokerId;
        topic = topicName;
        partition = partitionId;
        kafkaVersion = version;
        Map<String, Object> header = new LinkedHashMap<>();
        header.put("kind", "header");
        header.put("agent", "kreplica-agent");
        header.put("format", 1);
        header.put("kafka", version);
        header.put("broker", brokerId);
        header.put("pid", ProcessHandle.current().pid());
        header.put("nano", System.nanoTime());
        header.put("wall_ms", System.currentTimeMillis());
        header.put("java", System.getProperty("java.version"));
        header.put("topic", topicName);
        header.put("partition", partitionId);
        header.put("hooks", Agent.describe(hooks));
        open = true;
        line(header);
    }

    /** Write one line (a JSON object). */
    static void line(Map<String, Object> object) {
        byte[] bytes = (Json.write(object) + "\n").getBytes(StandardCharsets.UTF_8);
        synchronized (LOCK) {
            try {
                out.write(bytes);
            } catch (IOException e) {
                ERRORS.incrementAndGet(); // nowhere left to say it
            }
        }
    }

    /** A hook or the transformer failed: count it, and write an agent-error line. */
    public static void agentError(String where, Throwable error) {
        long n = ERRORS.incrementAndGet();
        if (!open || n > MAX_ERROR_LINES) return;
        try {
            Map<String, Object> line = new LinkedHashMap<>();
            line.put("kind", "agent-error");
            line.put("nano", System.nanoTime());
            line.put("broker", broker);
            line.put("thread", Thread.currentThread().getName());
            line.put("hook", where);
            line.put("error", String.valueOf(error));
            StackTraceElement[] trace = error.getStackTrace();
            line.put("at", trace.length > 0 ? trace[0].toString() : null);
            line.put("errors", n);
            line(line);
        } catch (Throwable ignored) {
            // the agent must never fail the broker
        }
    }

    /** A hooked class was transformed: a line for it, and hooks-installed once all were. */
    static void transformed(String className, Map<String, Integer> counts, boolean all) {
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("kind", "transformed");
        line.put("nano", System.nanoTime());
        line.put("broker", broker);
        line.put("class", className);
        line.put("hooks", counts);
        line(line);
        synchronized (INSTALLED) {
            INSTALLED.putAll(counts);
            if (!all) return;
            Map<String, Object> done = new LinkedHashMap<>();
            done.put("kind", "hooks-installed");
            done.put("nano", System.nanoTime());
            done.put("broker", broker);
            done.put("hooks", new LinkedHashMap<>(INSTALLED));
            line(done);
        }
    }
}
