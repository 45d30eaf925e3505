package dev.dynembed.job;

import java.time.Duration;
import java.util.Map;
import picocli.CommandLine.Option;

/**
 * The command-line options of a worker of a multi-worker job ({@code --coordinator --workers
 * --worker-index --job --lease-seconds --barrier-timeout}), shared by the models' {@code train}
 * commands as a picocli mixin, and the join they describe.
 */
public final class JobOptions {
  @Option(names = "--coordinator", description = "join a multi-worker job through etcd at"
      + " host:port[,host:port...]: the workers share the running shards, each trains its share"
      + " of the input, worker 0 leads (docs/design/0013-many-trainers.md)")
  String coordinator;
  @Option(names = "--workers", defaultValue = "1", description = "workers of the job"
      + " (--coordinator; default ${DEFAULT-VALUE})")
  int workers;
  @Option(names = "--worker-index", defaultValue = "-1", description = "this worker's index in"
      + " the job (0 leads: it checkpoints or saves into its own directories and resumes from"
      + " them; default: the lowest free one)")
  int workerIndex;
  @Option(names = "--job", description = "the job's name in etcd (default: --name)")
  String job;
  @Option(names = "--lease-seconds", defaultValue = "10", description = "a worker silent this"
      + " long has left the job, which stops (or, with --elastic, goes on without it; default"
      + " ${DEFAULT-VALUE})")
  long leaseSeconds;
  @Option(names = "--elastic", description = "a worker that leaves the job (killed, crashed, cut"
      + " off for --lease-seconds) has its share re-planned over the others at the end of the"
      + " round, and the job goes on; without it the job stops (every worker must agree)")
  boolean elastic;
  @Option(names = "--barrier-timeout", defaultValue = "1800", description = "seconds a barrier"
      + " (the end of a round or an epoch, and so a checkpoint) waits for the slowest worker"
      + " before the job stops (default ${DEFAULT-VALUE})")
  long barrierTimeout;

  /** Whether this run is a worker of a job (--coordinator given). */
  public boolean enabled() {
    return coordinator != null;
  }

  /** Refuses job options without a coordinator. */
  public void check() {
    if (coordinator == null && workers != 1) {
      throw new JobException("--workers needs --coordinator (the etcd that coordinates them)");
    }
    if (coordinator == null && elastic) {
      throw new JobException("--elastic needs --coordinator (a job of workers coordinated by etcd)");
    }
  }

  /** The job's name: --job, else {@code defaultName} (the model's --name). */
  public String name(String defaultName) {
    return job != null ? job : defaultName;
  }

  public int workers() {
    return workers;
  }

  public boolean elastic() {
    return elastic;
  }

  public String coordinator() {
    return coordinator;
  }

  /** Joins the job these options name and waits for its other workers. */
  public JobCoordinator join(String defaultName, Map<String, String> settings) {
    return JobCoordinator.join(coordinator, name(defaultName), workers, workerIndex, settings,
        new JobCoordinator.Options(Duration.ofSeconds(leaseSeconds), Duration.ofMinutes(10),
            Duration.ofSeconds(barrierTimeout), elastic));
  }
}
