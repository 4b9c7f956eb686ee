package bench;

import com.google.common.util.concurrent.FutureCallback;
import com.google.common.util.concurrent.Futures;
import com.google.common.util.concurrent.ListenableFuture;
import com.google.common.util.concurrent.MoreExecutors;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import software.amazon.awssdk.auth.credentials.EnvironmentVariableCredentialsProvider;
import software.amazon.kinesis.producer.KinesisProducer;
import software.amazon.kinesis.producer.KinesisProducerConfiguration;
import software.amazon.kinesis.producer.UserRecordFailedException;
import software.amazon.kinesis.producer.UserRecordResult;

/**
 * One KPL run of {@code python -m benchmarks kpl}; prints one JSON result line.
 *
 * <p>Arguments ({@code --name value}): {@code --host --port --stream --shards --size --keys
 * --linger-ms --count} (a burst) or {@code --rate --duration} (a paced schedule), {@code
 * --clk-tck} (the kernel's clock ticks per second, for /proc), {@code --variant}. The KPL talks
 * HTTPS to host:port without verifying the certificate, region us-east-1, no metrics,
 * credentials from the environment; nothing else changed from its defaults.
 *
 * <p>Burst: one record put and awaited (warm-up), then {@code count} records added as fast as
 * {@code addUserRecord} takes them, then every future awaited in order; the clock stops after
 * the last. Paced: record i is added at {@code t0 + i/rate} (or at once when behind) and its
 * latency, from that scheduled time, is taken in the future's callback. CPU: user + system
 * time of this JVM and of its native daemon (its child process) over the measured span, from
 * /proc.
 */
public final class KplRunner {
  private KplRunner() {}

  public static void main(String[] argv) throws Exception {
    Map<String, String> a = new HashMap<>();
    for (int i = 0; i + 1 < argv.length; i += 2) {
      if (!argv[i].startsWith("--")) {
        throw new IllegalArgumentException("expected --name value pairs, got " + argv[i]);
      }
      a.put(argv[i].substring(2), argv[i + 1]);
    }
    String stream = required(a, "stream");
    int size = Integer.parseInt(a.getOrDefault("size", "200"));
    int nkeys = Integer.parseInt(a.getOrDefault("keys", "256"));
    double rate = Double.parseDouble(a.getOrDefault("rate", "0"));
    double duration = Double.parseDouble(a.getOrDefault("duration", "10"));
    int count =
        rate > 0
            ? (int) Math.max(1, Math.round(rate * duration))
            : Integer.parseInt(a.getOrDefault("count", "50000"));
    long clkTck = Long.parseLong(a.getOrDefault("clk-tck", "100"));

    KinesisProducerConfiguration config =
        new KinesisProducerConfiguration()
            .setKinesisEndpoint(required(a, "host"))
            .setKinesisPort(Long.parseLong(required(a, "port")))
            .setVerifyCertificate(false)
            .setRegion("us-east-1")
            .setMetricsLevel("none")
            .setLogLevel("warning")
            .setRecordMaxBufferedTime(Long.parseLong(a.getOrDefault("linger-ms", "100")))
            .setCredentialsProvider(EnvironmentVariableCredentialsProvider.create());
    byte[] data = new byte[size];
    new Random(1).nextBytes(data);
    String[] keys = new String[nkeys];
    for (int i = 0; i < nkeys; i++) {
      keys[i] = String.format("key-%04d", i);
    }

    KinesisProducer producer = new KinesisProducer(config);
    try {
      UserRecordResult warm =
          producer.addUserRecord(stream, keys[0], ByteBuffer.wrap(data)).get(60, TimeUnit.SECONDS);
      if (!warm.isSuccessful()) {
        throw new IllegalStateException("warm-up record failed: " + lastError(warm));
      }
      long daemon = daemonPid();
      StringBuilder out = new StringBuilder("{");
      field(out, "variant", a.getOrDefault("variant", "KPL 1.1.1"));
      field(out, "library", "kpl");
      field(out, "backend", "java");
      number(out, "records", count);
      number(out, "record_bytes", size);
      number(out, "keys", nkeys);
      number(out, "shards", Long.parseLong(a.getOrDefault("shards", "0")));
      number(out, "linger_s", Long.parseLong(a.getOrDefault("linger-ms", "100")) / 1000.0);
      number(out, "daemon_pid", daemon);
      if (rate > 0) {
        paced(producer, stream, keys, data, count, rate, daemon, clkTck, out);
      } else {
        burst(producer, stream, keys, data, count, daemon, clkTck, out);
      }
      out.setLength(out.length() - 1);
      out.append('}');
      System.out.println(out);
      System.out.flush();
    } finally {
      producer.destroy();
    }
  }

  private static void burst(
      KinesisProducer producer,
      String stream,
      String[] keys,
      byte[] data,
      int n,
      long daemon,
      long clkTck,
      StringBuilder out)
      throws InterruptedException {
    List<ListenableFuture<UserRecordResult>> futures = new ArrayList<>(n);
    double jvm0 = cpuSeconds("self", clkTck);
    double daemon0 = cpuSeconds(Long.toString(daemon), clkTck);
    long t0 = System.nanoTime();
    for (int i = 0; i < n; i++) {
      futures.add(producer.addUserRecord(stream, keys[i % keys.length], ByteBuffer.wrap(data)));
    }
    int failed = 0;
    Map<String, Integer> codes = new HashMap<>();
    for (ListenableFuture<UserRecordResult> f : futures) {
      String error = outcome(f);
      if (error != null) {
        failed++;
        codes.merge(error, 1, Integer::sum);
      }
    }
    double elapsed = (System.nanoTime() - t0) / 1e9;
    double jvm = cpuSeconds("self", clkTck) - jvm0;
    double dmn = cpuSeconds(Long.toString(daemon), clkTck) - daemon0;
    measured(out, n, elapsed, jvm, dmn, failed, codes);
  }

  private static void paced(
      KinesisProducer producer,
      String stream,
      String[] keys,
      byte[] data,
      int n,
      double rate,
      long daemon,
      long clkTck,
      StringBuilder out)
      throws InterruptedException {
    long[] latencyNs = new long[n];
    boolean[] ok = new boolean[n];
    AtomicInteger failed = new AtomicInteger();
    Map<String, Integer> codes = new HashMap<>();
    CountDownLatch done = new CountDownLatch(n);
    long[] lastDone = {0};
    double jvm0 = cpuSeconds("self", clkTck);
    double daemon0 = cpuSeconds(Long.toString(daemon), clkTck);
    long t0 = System.nanoTime() + 10_000_000L;
    long maxLag = 0;
    for (int i = 0; i < n; i++) {
      final int index = i;
      final long due = t0 + Math.round(i * 1e9 / rate);
      long now = System.nanoTime();
      while (now < due) {
        LockSupport.parkNanos(due - now);
        now = System.nanoTime();
      }
      maxLag = Math.max(maxLag, now - due);
      ListenableFuture<UserRecordResult> f =
          producer.addUserRecord(stream, keys[i % keys.length], ByteBuffer.wrap(data));
      Futures.addCallback(
          f,
          new FutureCallback<UserRecordResult>() {
            @Override
            public void onSuccess(UserRecordResult result) {
              long t = System.nanoTime();
              latencyNs[index] = t - due;
              if (result.isSuccessful()) {
                ok[index] = true;
              } else {
                fail(lastError(result));
              }
              finish(t);
            }

            @Override
            public void onFailure(Throwable e) {
              fail(errorOf(e));
              finish(System.nanoTime());
            }

            private void fail(String code) {
              failed.incrementAndGet();
              synchronized (codes) {
                codes.merge(code, 1, Integer::sum);
              }
            }

            private void finish(long t) {
              synchronized (lastDone) {
                lastDone[0] = Math.max(lastDone[0], t);
              }
              done.countDown();
            }
          },
          MoreExecutors.directExecutor());
    }
    done.await();
    double elapsed;
    synchronized (lastDone) {
      elapsed = (lastDone[0] - t0) / 1e9;
    }
    double jvm = cpuSeconds("self", clkTck) - jvm0;
    double dmn = cpuSeconds(Long.toString(daemon), clkTck) - daemon0;
    measured(out, n, elapsed, jvm, dmn, failed.get(), codes);
    number(out, "target_rate", rate);
    number(out, "max_put_lag_ms", maxLag / 1e6);
    out.append("\"latencies_ms\":[");
    boolean first = true;
    for (int i = 0; i < n; i++) {
      if (ok[i]) {
        if (!first) {
          out.append(',');
        }
        out.append(String.format("%.3f", latencyNs[i] / 1e6));
        first = false;
      }
    }
    out.append("],");
  }

  /** Null when the record was put, else its error code (or the exception's class). */
  private static String outcome(ListenableFuture<UserRecordResult> f) throws InterruptedException {
    try {
      UserRecordResult r = f.get();
      return r.isSuccessful() ? null : lastError(r);
    } catch (ExecutionException e) {
      return errorOf(e.getCause());
    }
  }

  private static String errorOf(Throwable e) {
    if (e instanceof UserRecordFailedException) {
      return lastError(((UserRecordFailedException) e).getResult());
    }
    return e.getClass().getSimpleName();
  }

  private static String lastError(UserRecordResult r) {
    if (r.getAttempts().isEmpty()) {
      return "no attempt";
    }
    return r.getAttempts().get(r.getAttempts().size() - 1).getErrorCode();
  }

  private static void measured(
      StringBuilder out,
      int n,
      double elapsed,
      double jvm,
      double daemon,
      int failed,
      Map<String, Integer> codes) {
    double cpu = jvm + daemon;
    number(out, "elapsed_s", elapsed);
    number(out, "records_per_s", n / elapsed);
    number(out, "cpu_s", cpu);
    number(out, "cpu_jvm_s", jvm);
    number(out, "cpu_daemon_s", daemon);
    number(out, "cpu_us_per_record", cpu / n * 1e6);
    number(out, "failed", failed);
    out.append("\"error_codes\":{");
    synchronized (codes) {
      for (Map.Entry<String, Integer> e : codes.entrySet()) {
        out.append('"').append(escape(e.getKey())).append("\":").append(e.getValue()).append(',');
      }
      if (!codes.isEmpty()) {
        out.setLength(out.length() - 1);
      }
    }
    out.append("},");
  }

  /** The KPL's native daemon: this JVM's one child process. */
  private static long daemonPid() {
    return ProcessHandle.current()
        .children()
        .findFirst()
        .map(ProcessHandle::pid)
        .orElseThrow(() -> new IllegalStateException("the KPL daemon is not running"));
  }

  /** utime + stime of /proc/PID/stat (fields 14 and 15), in seconds. */
  private static double cpuSeconds(String pid, long clkTck) {
    try {
      String stat = Files.readString(Path.of("/proc", pid, "stat"));
      String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
      return (Long.parseLong(f[11]) + Long.parseLong(f[12])) / (double) clkTck;
    } catch (IOException e) {
      throw new IllegalStateException("cannot read /proc/" + pid + "/stat", e);
    }
  }

  private static String required(Map<String, String> a, String name) {
    String v = a.get(name);
    if (v == null) {
      throw new IllegalArgumentException("missing --" + name);
    }
    return v;
  }

  private static void field(StringBuilder out, String name, String value) {
    out.append('"').append(name).append("\":\"").append(escape(value)).append("\",");
  }

  private static void number(StringBuilder out, String name, long value) {
    out.append('"').append(name).append("\":").append(value).append(',');
  }

  private static void number(StringBuilder out, String name, double value) {
    out.append('"').append(name).append("\":").append(value).append(',');
  }

  private static String escape(String s) {
    return s.replace("\\", "\\\\").replace("\"", "\\\"");
  }
}
