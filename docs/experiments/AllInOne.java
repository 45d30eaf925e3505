// The sixth pass's experiment (docs/benchmarks.md, "Sixth pass: the trainer and both shards in
// one JVM"): 2 shards and the word2vec trainer in one JVM, the calls still on the native data
// plane over loopback TCP. Not a supported mode: a measurement of the remote path without its
// extra JVMs. Run from the repository root after `mvn install -DskipTests`:
//
//   CP="models/word2vec/target/classes:$(cat models/word2vec/target/classpath.txt)"
//   javac -d /tmp/aio -cp "$CP" docs/experiments/AllInOne.java docs/experiments/WarmJvm.java
//   java -Xmx4g -XX:+UseParallelGC --add-modules jdk.incubator.vector -XX:CompileCommand=quiet \
//     -XX:CompileCommand=exclude,org.nd4j.autodiff.samediff.internal.AbstractSession::output \
//     -cp "/tmp/aio:$CP" AllInOne /tmp/aio/run 3 ../shared/data/brown.txt [trainer options...]
//
// Trainer options after the corpus are passed on to `word2vec train` (for example
// `--pipeline off --row-cache-mb 64 --max-staleness 128`, as `--shards 2` runs the trainer).
// With -Daio.runs=N the training runs N times against the same shards (a fresh table name
// each time), so that later runs find every JVM's code compiled; each run is followed by a line
// "AIO run i: X s wall, Y s CPU (Z s JIT)", the process's CPU during it (shards included).
// With -Daio.jfr=FILE the last run alone is recorded by JFR (settings "profile").
import java.net.Socket;

public class AllInOne {
  public static void main(String[] args) throws Exception {
    String dir = args[0]; // the shards' data directory; the model goes in it
    String epochs = args[1];
    String corpus = args[2];
    int[] ports = {17101, 17102};
    for (int s = 0; s < 2; s++) {
      String[] argv = {"--port", "" + ports[s], "--shard-index", "" + s, "--num-shards", "2",
          "--data-dir", dir, "--no-snapshot-on-exit", "--fsync", "everysec"};
      Thread t = new Thread(() -> new picocli.CommandLine(
          new dev.dynembed.table.server.TableServerMain()).execute(argv), "shard-main-" + s);
      t.setDaemon(true);
      t.start();
    }
    for (int p : ports) { // until both shards listen
      while (true) {
        try (Socket so = new Socket("127.0.0.1", p)) {
          break;
        } catch (java.io.IOException e) {
          Thread.sleep(100);
        }
      }
    }
    int runs = Integer.getInteger("aio.runs", 1);
    for (int i = 1; i <= runs; i++) {
      java.util.List<String> train = new java.util.ArrayList<>(java.util.List.of("train",
          "--input", corpus, "--model", dir + "/model-" + i, "--epochs", epochs, "--threads",
          "2", "--overwrite", "--endpoints", "localhost:17101,localhost:17102"));
      train.addAll(java.util.Arrays.asList(args).subList(3, args.length));
      if (runs > 1) {
        train.addAll(java.util.List.of("--name", "run" + i));
      }
      WarmJvm.timedRun("AIO", i, i == runs ? System.getProperty("aio.jfr") : null, train);
    }
    System.exit(0);
  }
}
