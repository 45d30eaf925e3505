package dev.dynembed.table.common;

/**
 * The version of the checkpoint format (docs/design/0004-checkpoint-format.md): written by the
 * engine in every shard file and by the client in every manifest, checked by both on restore.
 */
public final class CheckpointFormat {
  private CheckpointFormat() {}

  public static final int VERSION = 1;
}
