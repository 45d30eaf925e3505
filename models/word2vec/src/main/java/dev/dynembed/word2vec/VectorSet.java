package dev.dynembed.word2vec;

import dev.dynembed.table.client.TableClients;
import dev.dynembed.table.client.EmbeddingTable;
import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Words and their vectors, most frequent first: what {@code export} writes, what {@code eval}
 * scores (the same code for this project's models and for vectors of other tools), in
 * word2vec's text and binary formats.
 */
public final class VectorSet {
  private final List<String> words;
  private final float[] vectors; // [n, dim]
  private final int dim;
  private final Map<String, Integer> index = new HashMap<>();

  public VectorSet(List<String> words, float[] vectors, int dim) {
    this.words = List.copyOf(words);
    this.vectors = vectors;
    this.dim = dim;
    for (int i = 0; i < words.size(); i++) {
      index.putIfAbsent(words.get(i), i);
    }
  }

  public int size() {
    return words.size();
  }

  public int dim() {
    return dim;
  }

  public List<String> words() {
    return words;
  }

  /** Row of {@code word}, or -1. */
  public int indexOf(String word) {
    return index.getOrDefault(word, -1);
  }

  public float[] vector(int i) {
    return java.util.Arrays.copyOfRange(vectors, i * dim, (i + 1) * dim);
  }

  float[] raw() {
    return vectors;
  }

  /**
   * The input vectors of a trained model, ordered by the word counts of its output table (ties
   * by word).
   */
  public static VectorSet fromModel(Path modelDir) {
    Word2VecConfig cfg = ModelDir.config(modelDir);
    Path tables = ModelDir.tables(modelDir);
    EmbeddingTable in = TableClients.loadCheckpoint(tables, cfg.inTable());
    EmbeddingTable out = TableClients.loadCheckpoint(tables, cfg.outTable());
    Map<String, Long> freq = new HashMap<>();
    out.scan(65536, p -> {
      for (int i = 0; i < p.keys().length; i++) {
        freq.put(p.keys()[i], p.frequencies()[i]);
      }
    });
    Map<String, float[]> rows = new HashMap<>();
    int dim = cfg.dim();
    in.scan(65536, p -> {
      for (int i = 0; i < p.keys().length; i++) {
        rows.put(p.keys()[i], java.util.Arrays.copyOfRange(p.rows(), i * dim, (i + 1) * dim));
      }
    });
    List<String> words = new ArrayList<>(rows.keySet());
    words.sort(Comparator.comparingLong((String w) -> -freq.getOrDefault(w, 0L))
        .thenComparing(Comparator.naturalOrder()));
    float[] v = new float[words.size() * dim];
    for (int i = 0; i < words.size(); i++) {
      System.arraycopy(rows.get(words.get(i)), 0, v, i * dim, dim);
    }
    return new VectorSet(words, v, dim);
  }

  /** Writes word2vec's text ({@code binary = false}) or binary format, atomically. */
  public void write(Path file, boolean binary) throws IOException {
    Path tmp = file.resolveSibling(file.getFileName() + ".tmp");
    try (OutputStream os = new BufferedOutputStream(Files.newOutputStream(tmp), 1 << 16)) {
      os.write((size() + " " + dim + "\n").getBytes(StandardCharsets.UTF_8));
      ByteBuffer row = ByteBuffer.allocate(4 * dim).order(ByteOrder.LITTLE_ENDIAN);
      StringBuilder sb = new StringBuilder();
      for (int i = 0; i < size(); i++) {
        if (binary) {
          os.write((words.get(i) + " ").getBytes(StandardCharsets.UTF_8));
          row.clear();
          for (int j = 0; j < dim; j++) {
            row.putFloat(vectors[i * dim + j]);
          }
          os.write(row.array());
          os.write('\n');
        } else {
          sb.setLength(0);
          sb.append(words.get(i));
          for (int j = 0; j < dim; j++) {
            sb.append(' ').append(vectors[i * dim + j]);
          }
          sb.append('\n');
          os.write(sb.toString().getBytes(StandardCharsets.UTF_8));
        }
      }
    }
    Files.move(tmp, file, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
  }

  /** Reads word2vec's text or binary format (told apart by content). */
  public static VectorSet read(Path file) {
    try (InputStream raw = new BufferedInputStream(Files.newInputStream(file), 1 << 16)) {
      DataInputStream in = new DataInputStream(raw);
      String header = token(in);
      String second = token(in);
      int n;
      int dim;
      try {
        n = Integer.parseInt(header);
        dim = Integer.parseInt(second);
      } catch (NumberFormatException e) {
        String seen = (header + " " + second).replaceAll("[^\\x20-\\x7E]", "?");
        throw new CorpusException(file + " is not in word2vec format (the first line must be"
            + " '<words> <dim>'; it starts with '" + seen.substring(0, Math.min(40, seen.length()))
            + "')");
      }
      if (n < 0 || dim < 1 || dim > 100_000) {
        throw new CorpusException(file + ": invalid header " + n + " " + dim);
      }
      List<String> words = new ArrayList<>(n);
      float[] v = new float[(int) Math.min((long) n * dim, Integer.MAX_VALUE - 8)];
      in.mark(1 << 16);
      boolean binary = isBinary(in, dim);
      in.reset();
      byte[] row = new byte[4 * dim];
      for (int i = 0; i < n; i++) {
        words.add(token(in));
        if (binary) {
          in.readFully(row);
          ByteBuffer b = ByteBuffer.wrap(row).order(ByteOrder.LITTLE_ENDIAN);
          for (int j = 0; j < dim; j++) {
            v[i * dim + j] = b.getFloat();
          }
        } else {
          for (int j = 0; j < dim; j++) {
            v[i * dim + j] = Float.parseFloat(token(in));
          }
        }
      }
      return new VectorSet(words, v, dim);
    } catch (EOFException e) {
      throw new CorpusException(file + " is truncated (fewer vectors than its header says)");
    } catch (NumberFormatException e) {
      throw new CorpusException(file + ": a vector holds a non-number: " + e.getMessage());
    } catch (IOException e) {
      throw new CorpusException("cannot read " + file + ": " + e.getMessage(), e);
    }
  }

  /** Text format: after the first word, dim numbers in ASCII; binary: raw floats. */
  private static boolean isBinary(DataInputStream in, int dim) throws IOException {
    token(in);
    for (int j = 0; j < Math.min(dim, 4); j++) {
      int b = in.read();
      if (b < 0) {
        return false;
      }
      if (!(b == '-' || b == '.' || b == 'e' || b == 'E' || b == '+' || (b >= '0' && b <= '9')
          || b == ' ')) {
        return true;
      }
    }
    return false;
  }

  /** The next whitespace-delimited token, UTF-8; EOFException at the end. */
  private static String token(DataInputStream in) throws IOException {
    java.io.ByteArrayOutputStream b = new java.io.ByteArrayOutputStream();
    int c;
    while ((c = in.read()) >= 0 && (c == ' ' || c == '\n' || c == '\r' || c == '\t')) {
      // skip
    }
    if (c < 0) {
      throw new EOFException();
    }
    do {
      b.write(c);
    } while ((c = in.read()) >= 0 && c != ' ' && c != '\n' && c != '\r' && c != '\t');
    return b.toString(StandardCharsets.UTF_8);
  }

  /** Unit-length copies of the vectors (zero vectors stay zero). */
  float[] normalized() {
    float[] u = vectors.clone();
    for (int i = 0; i < size(); i++) {
      double s = 0;
      for (int j = 0; j < dim; j++) {
        s += (double) u[i * dim + j] * u[i * dim + j];
      }
      float inv = s > 0 ? (float) (1 / Math.sqrt(s)) : 0f;
      for (int j = 0; j < dim; j++) {
        u[i * dim + j] *= inv;
      }
    }
    return u;
  }
}
