// Issue 52's warm-up, isolated (docs/benchmarks.md, "Warm JVMs: the warm-up taken out"): the
// same `word2vec train` run N times in one JVM, so the second and later runs find their code
// compiled and their classes loaded. Not a supported mode: a measurement of what a whole run
// costs without the JVM's warm-up (what an ahead-of-time compiled or long-lived trainer could
// reach). Run from the repository root after `mvn install -DskipTests`:
//
//   CP="models/word2vec/target/classes:$(cat models/word2vec/target/classpath.txt)"
//   javac -d /tmp/warm -cp "$CP" docs/experiments/WarmJvm.java
//   java -Xmx2g -XX:+UseParallelGC --add-modules jdk.incubator.vector -XX:CompileCommand=quiet \
//     -XX:CompileCommand=exclude,org.nd4j.autodiff.samediff.internal.AbstractSession::output \
//     -cp "/tmp/warm:$CP" WarmJvm 3 /tmp/warm/model --input ../shared/data/brown.txt --epochs 5
//
// Each run prints its own report (time, last epoch, loss); the line "WARM run i: X s wall, Y s
// CPU (Z s JIT)" after it is this process's CPU during that run, the JIT's included. With
// -Dwarm.jfr=FILE the last run alone is recorded by JFR (settings "profile").
import java.lang.management.ManagementFactory;

public class WarmJvm {
  public static void main(String[] args) throws Exception {
    int runs = Integer.parseInt(args[0]);
    String model = args[1];
    for (int i = 1; i <= runs; i++) {
      java.util.List<String> a = new java.util.ArrayList<>(java.util.List.of("train", "--model",
          model + "-" + i, "--overwrite"));
      a.addAll(java.util.Arrays.asList(args).subList(2, args.length));
      timedRun("WARM", i, i == runs ? System.getProperty("warm.jfr") : null, a);
    }
    System.exit(0);
  }

  /**
   * Runs {@code word2vec} with these arguments in this JVM and prints "LABEL run i: rc, wall,
   * CPU (JIT)": the process's CPU during the run, every thread's. With {@code jfr} not null the
   * run is recorded there by JFR (settings "profile"). Also used by {@code AllInOne}.
   */
  static void timedRun(String label, int i, String jfr, java.util.List<String> args)
      throws Exception {
    var os = (com.sun.management.OperatingSystemMXBean)
        ManagementFactory.getOperatingSystemMXBean();
    var jit = ManagementFactory.getCompilationMXBean();
    jdk.jfr.Recording rec = null;
    if (jfr != null) {
      rec = new jdk.jfr.Recording(jdk.jfr.Configuration.getConfiguration("profile"));
      rec.setDestination(java.nio.file.Path.of(jfr));
      rec.start();
    }
    long cpu0 = os.getProcessCpuTime();
    long jit0 = jit.getTotalCompilationTime();
    long t0 = System.nanoTime();
    int rc = dev.dynembed.word2vec.Word2VecCli.run(args.toArray(new String[0]), System.out,
        System.err);
    System.out.printf("%s run %d: rc %d, %.1f s wall, %.1f s CPU (%.1f s JIT)%n", label, i, rc,
        (System.nanoTime() - t0) / 1e9, (os.getProcessCpuTime() - cpu0) / 1e9,
        (jit.getTotalCompilationTime() - jit0) / 1e3);
    if (rec != null) {
      rec.stop(); // written to its destination
    }
    System.gc();
  }
}
