package dev.dynembed.layers.feed;

import com.google.protobuf.TextFormat;
import dev.dynembed.layers.feed.v1.DataFeedDesc;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * A checked data-feed description ({@code dynembed.feed.v1.DataFeedDesc}, Paddle's field names, in
 * protobuf text format): the batch size and the slots of every line of a multi-slot file. Build
 * with {@link #parse(String)} or {@link #read(Path)}; every rule below is checked there, with an
 * error that names the slot.
 *
 * <ul>
 *   <li>at least one slot, and at least one used slot;
 *   <li>names match {@code [A-Za-z_][A-Za-z0-9_]*}, at most 100 characters, unique, and no slot is
 *       named {@code <other>_mask} of a sparse used slot (its mask placeholder);
 *   <li>type {@code uint64}, {@code string} or {@code float};
 *   <li>a dense slot has a shape of positive dimensions, at most 2^20 values; a sparse slot has
 *       no shape (its length varies per line) and is not of type float (sparse float values would
 *       need keys: give them as a dense slot);
 *   <li>batch size in 1..2^20 (0 means Paddle's default, 32).
 * </ul>
 */
public final class FeedDescription {
  /** A slot's value type. */
  public enum Type {
    UINT64, STRING, FLOAT
  }

  /**
   * One slot, in line order.
   *
   * @param size the number of values of a dense slot on every line; 0 for a sparse slot
   */
  public record Slot(String name, Type type, boolean dense, boolean used, int[] shape, int size) {
    /** Whether the values are table keys (uint64 or string). */
    public boolean keys() {
      return type != Type.FLOAT;
    }

    /** The mask placeholder of a sparse slot. */
    public String maskName() {
      return name + "_mask";
    }
  }

  public static final int DEFAULT_BATCH_SIZE = 32;
  static final int MAX_BATCH = 1 << 20;
  static final int MAX_DENSE = 1 << 20;

  private final String name;
  private final int batchSize;
  private final List<Slot> slots;

  private final DataFeedDesc proto;

  private FeedDescription(String name, int batchSize, List<Slot> slots, DataFeedDesc proto) {
    this.proto = proto;
    this.name = name;
    this.batchSize = batchSize;
    this.slots = List.copyOf(slots);
  }

  /** Reads and checks a description file (protobuf text format). */
  public static FeedDescription read(Path file) {
    String text;
    try {
      text = Files.readString(file, StandardCharsets.UTF_8);
    } catch (IOException e) {
      throw new FeedException("data-feed description " + file + " cannot be read: " + e, e);
    }
    try {
      return parse(text);
    } catch (FeedException e) {
      throw new FeedException("data-feed description " + file + ": " + e.getMessage(), e);
    }
  }

  /** Parses and checks a description in protobuf text format. */
  public static FeedDescription parse(String text) {
    DataFeedDesc.Builder b = DataFeedDesc.newBuilder();
    try {
      TextFormat.getParser().merge(text, b);
    } catch (TextFormat.ParseException e) {
      throw new FeedException("not a valid DataFeedDesc (protobuf text format): "
          + e.getMessage(), e);
    }
    return of(b.build());
  }

  /** Checks a description message. */
  public static FeedDescription of(DataFeedDesc d) {
    int batch = d.getBatchSize() == 0 ? DEFAULT_BATCH_SIZE : d.getBatchSize();
    if (batch < 1 || batch > MAX_BATCH) {
      throw new FeedException("batch_size must be in 1.." + MAX_BATCH + " but was "
          + d.getBatchSize());
    }
    if (d.getMultiSlotDesc().getSlotsCount() == 0) {
      throw new FeedException("multi_slot_desc has no slots");
    }
    List<Slot> slots = new ArrayList<>();
    Set<String> names = new HashSet<>();
    for (dev.dynembed.layers.feed.v1.Slot s : d.getMultiSlotDesc().getSlotsList()) {
      String n = s.getName();
      if (!n.matches("[A-Za-z_][A-Za-z0-9_]{0,99}")) {
        throw new FeedException("slot name '" + n + "' must match [A-Za-z_][A-Za-z0-9_]*"
            + " (at most 100 characters): it names a placeholder");
      }
      if (!names.add(n)) {
        throw new FeedException("slot '" + n + "' is described twice");
      }
      Type type = switch (s.getType()) {
        case "uint64" -> Type.UINT64;
        case "string" -> Type.STRING;
        case "float" -> Type.FLOAT;
        default -> throw new FeedException("slot '" + n + "': type must be uint64, string or"
            + " float but was '" + s.getType() + "'");
      };
      int[] shape = s.getShapeList().stream().mapToInt(Integer::intValue).toArray();
      int size = 0;
      if (s.getIsDense()) {
        if (shape.length == 0) {
          throw new FeedException("slot '" + n + "' is dense but has no shape (e.g. shape: 1)");
        }
        long prod = 1;
        for (int x : shape) {
          if (x < 1) {
            throw new FeedException("slot '" + n + "': shape dimensions must be >= 1 but were "
                + java.util.Arrays.toString(shape));
          }
          prod *= x;
          if (prod > MAX_DENSE) {
            throw new FeedException("slot '" + n + "': a dense slot holds at most " + MAX_DENSE
                + " values per line; shape " + java.util.Arrays.toString(shape));
          }
        }
        size = (int) prod;
      } else {
        if (shape.length > 0) {
          throw new FeedException("slot '" + n + "' is sparse (its length varies per line) but"
              + " has a shape; drop the shape or set is_dense: true");
        }
        if (type == Type.FLOAT) {
          throw new FeedException("slot '" + n + "': a sparse slot holds keys (uint64 or"
              + " string); give float values as a dense slot with a shape");
        }
      }
      slots.add(new Slot(n, type, s.getIsDense(), s.getIsUsed(), shape, size));
    }
    for (Slot s : slots) {
      if (s.used() && !s.dense() && names.contains(s.maskName())) {
        throw new FeedException("slot '" + s.maskName() + "' clashes with the mask placeholder"
            + " of sparse slot '" + s.name() + "'");
      }
    }
    if (slots.stream().noneMatch(Slot::used)) {
      throw new FeedException("no slot is used (is_used: true): a batch would be empty");
    }
    return new FeedDescription(d.getName(), batch, slots, d);
  }

  public String name() {
    return name;
  }

  /** The description in protobuf text format ({@link #parse} reads it back). */
  public String text() {
    return TextFormat.printer().printToString(proto);
  }

  public int batchSize() {
    return batchSize;
  }

  /** Every slot, in line order (used or not). */
  public List<Slot> slots() {
    return slots;
  }

  /** The placeholders a batch fills: each used slot's name, and each used sparse slot's mask. */
  public List<String> placeholders() {
    List<String> out = new ArrayList<>();
    for (Slot s : slots) {
      if (s.used()) {
        out.add(s.name());
        if (!s.dense()) {
          out.add(s.maskName());
        }
      }
    }
    return out;
  }
}
