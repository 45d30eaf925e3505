package dev.dynembed.layers.feed;

import dev.dynembed.layers.AsyncExecutor;
import dev.dynembed.ops.KeyArrays;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * Streams a multi-slot text file (Paddle's MultiSlotDataFeed format, described by a {@link
 * FeedDescription}) into batches for {@link AsyncExecutor#runFromFiles}: one example per line,
 * for every slot in order a count n then n values. A batch holds {@code batchSize} examples (the
 * file's last batch may hold fewer) and maps, for each used slot:
 *
 * <ul>
 *   <li>sparse key slot {@code s}: {@code s} UTF8 [b, L] (L the longest line's count in the
 *       batch; shorter lines are padded by repeating their first value, so that padding reads
 *       no row the example does not already read and creates none) and {@code s_mask} FLOAT [b,
 *       L] (1 = a value, 0 = padding): what {@code Layers.embeddingBag} and {@code
 *       sampledLogits} take;
 *   <li>dense key slot: UTF8 [b, size];
 *   <li>dense float slot: FLOAT [b, shape...].
 * </ul>
 *
 * <p>uint64 values are decimal unsigned 64-bit integers, kept as their canonical decimal string
 * (so "007" and "7" are one key); string values are any token. Blank lines are skipped. Any
 * malformed line is an error naming the file, the line number and the slot; the file is never
 * modified. Input must be UTF-8.
 */
public final class MultiSlotReader implements AsyncExecutor.BatchReader {
  private final FeedDescription desc;

  public MultiSlotReader(FeedDescription desc) {
    this.desc = desc;
  }

  @Override
  public Iterable<Map<String, INDArray>> read(Path file) {
    return () -> new Batches(file);
  }

  /** Every batch of a file, read whole (tests, small files). */
  public List<Map<String, INDArray>> readAll(Path file) {
    List<Map<String, INDArray>> out = new ArrayList<>();
    read(file).forEach(out::add);
    return out;
  }

  /** One example's used values, per used slot (in slot order). */
  private final class Example {
    final Object[] values; // String[] for key slots, float[] for float slots
    Example(int used) {
      values = new Object[used];
    }
  }

  private final class Batches implements Iterator<Map<String, INDArray>>, AutoCloseable {
    private final Path file;
    private final BufferedReader in;
    private final List<FeedDescription.Slot> used = new ArrayList<>();
    private long lineNo;
    private Map<String, INDArray> next;
    private boolean closed;

    Batches(Path file) {
      this.file = file;
      for (FeedDescription.Slot s : desc.slots()) {
        if (s.used()) {
          used.add(s);
        }
      }
      try {
        // strict UTF-8: a malformed byte is an error, not a replacement character in a key
        this.in = new BufferedReader(new InputStreamReader(Files.newInputStream(file),
            StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                .onUnmappableCharacter(CodingErrorAction.REPORT)), 1 << 16);
      } catch (IOException e) {
        throw new FeedException("feed file " + file + " cannot be read: " + e, e);
      }
    }

    @Override
    public boolean hasNext() {
      if (next == null && !closed) {
        next = readBatch();
      }
      return next != null;
    }

    @Override
    public Map<String, INDArray> next() {
      if (!hasNext()) {
        throw new NoSuchElementException();
      }
      Map<String, INDArray> b = next;
      next = null;
      return b;
    }

    @Override
    public void close() {
      if (!closed) {
        closed = true;
        try {
          in.close();
        } catch (IOException ignored) {
          // read-only
        }
      }
    }

    private Map<String, INDArray> readBatch() {
      List<Example> examples = new ArrayList<>(desc.batchSize());
      try {
        String line;
        while (examples.size() < desc.batchSize() && (line = in.readLine()) != null) {
          lineNo++;
          if (!line.isBlank()) {
            examples.add(parse(line));
          }
        }
      } catch (CharacterCodingException e) {
        close();
        throw new FeedException(where() + ": not valid UTF-8 (" + e + ")", e);
      } catch (IOException e) {
        close();
        throw new UncheckedIOException("feed file " + file + " cannot be read", e);
      } catch (FeedException e) {
        close();
        throw e;
      }
      if (examples.isEmpty()) {
        close();
        return null;
      }
      return batch(examples);
    }

    private String where() {
      return file + ":" + (lineNo + 1);
    }

    private Example parse(String line) {
      String[] tok = line.trim().split("[ \\t]+");
      Example ex = new Example(used.size());
      int at = 0;
      int u = 0;
      String place = file + ":" + lineNo;
      for (FeedDescription.Slot s : desc.slots()) {
        if (at >= tok.length) {
          throw new FeedException(place + ": slot '" + s.name() + "': the line ends before"
              + " its count (" + tok.length + " values on the line)");
        }
        int n;
        try {
          n = Integer.parseInt(tok[at]);
        } catch (NumberFormatException e) {
          throw new FeedException(place + ": slot '" + s.name() + "': expected a count, found '"
              + abbreviate(tok[at]) + "'");
        }
        if (s.dense() ? n != s.size() : n < 1) {
          throw new FeedException(place + ": slot '" + s.name() + "': count " + n + (s.dense()
              ? " but the slot is dense with " + s.size() + " values"
              : " but a sparse slot needs at least 1 value (pad an empty one)"));
        }
        if (n > tok.length - at - 1) {
          throw new FeedException(place + ": slot '" + s.name() + "': count " + n + " but only "
              + (tok.length - at - 1) + " values left on the line");
        }
        at++;
        // parsed even when unused: every line must be valid, whatever a model reads of it
        Object v = s.keys() ? keys(s, tok, at, n, place) : floats(s, tok, at, n, place);
        if (s.used()) {
          ex.values[u++] = v;
        }
        at += n;
      }
      if (at != tok.length) {
        throw new FeedException(place + ": " + (tok.length - at) + " values after the last slot"
            + " ('" + desc.slots().get(desc.slots().size() - 1).name() + "'); the description"
            + " has " + desc.slots().size() + " slots");
      }
      return ex;
    }

    private String[] keys(FeedDescription.Slot s, String[] tok, int at, int n, String place) {
      String[] out = new String[n];
      for (int i = 0; i < n; i++) {
        String t = tok[at + i];
        if (s.type() == FeedDescription.Type.UINT64) {
          try {
            t = Long.toUnsignedString(Long.parseUnsignedLong(t));
          } catch (NumberFormatException e) {
            throw new FeedException(place + ": slot '" + s.name() + "' (uint64): value " + (i + 1)
                + " is '" + abbreviate(t) + "', not an unsigned 64-bit integer");
          }
        } else if (t.length() > 4096) {
          throw new FeedException(place + ": slot '" + s.name() + "': value " + (i + 1) + " is "
              + t.length() + " characters long (at most 4096)");
        }
        out[i] = t;
      }
      return out;
    }

    private float[] floats(FeedDescription.Slot s, String[] tok, int at, int n, String place) {
      float[] out = new float[n];
      for (int i = 0; i < n; i++) {
        float v;
        try {
          v = Float.parseFloat(tok[at + i]);
        } catch (NumberFormatException e) {
          throw new FeedException(place + ": slot '" + s.name() + "' (float): value " + (i + 1)
              + " is '" + abbreviate(tok[at + i]) + "', not a number");
        }
        if (!Float.isFinite(v)) {
          throw new FeedException(place + ": slot '" + s.name() + "' (float): value " + (i + 1)
              + " is " + tok[at + i] + ", not finite");
        }
        out[i] = v;
      }
      return out;
    }

    private Map<String, INDArray> batch(List<Example> ex) {
      int b = ex.size();
      Map<String, INDArray> out = new HashMap<>();
      for (int u = 0; u < used.size(); u++) {
        FeedDescription.Slot s = used.get(u);
        if (!s.keys()) {
          float[] all = new float[b * s.size()];
          for (int e = 0; e < b; e++) {
            System.arraycopy((float[]) ex.get(e).values[u], 0, all, e * s.size(), s.size());
          }
          long[] shape = new long[s.shape().length + 1];
          shape[0] = b;
          for (int i = 0; i < s.shape().length; i++) {
            shape[i + 1] = s.shape()[i];
          }
          out.put(s.name(), Nd4j.create(all, shape, DataType.FLOAT));
        } else if (s.dense()) {
          List<String> all = new ArrayList<>(b * s.size());
          for (int e = 0; e < b; e++) {
            all.addAll(List.of((String[]) ex.get(e).values[u]));
          }
          out.put(s.name(), KeyArrays.of(all, b, s.size()));
        } else {
          int len = 0;
          for (int e = 0; e < b; e++) {
            len = Math.max(len, ((String[]) ex.get(e).values[u]).length);
          }
          List<String> all = new ArrayList<>(b * len);
          float[] mask = new float[b * len];
          for (int e = 0; e < b; e++) {
            String[] v = (String[]) ex.get(e).values[u];
            for (int i = 0; i < len; i++) {
              all.add(i < v.length ? v[i] : v[0]); // padding: a key the example already has
              mask[e * len + i] = i < v.length ? 1f : 0f;
            }
          }
          out.put(s.name(), KeyArrays.of(all, b, len));
          out.put(s.maskName(), Nd4j.create(mask, new long[] {b, len}, DataType.FLOAT));
        }
      }
      return out;
    }
  }

  private static String abbreviate(String t) {
    return t.length() <= 40 ? t : t.substring(0, 40) + "...";
  }
}
