import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * The docs' names stay true: every class name that a Markdown file of the repo puts in backticks
 * ({@code `ShardEngine`}, {@code `ShardEngine.lockLive(...)`}, {@code `ClientOptions.RowCaching`})
 * must be a type declared in the tree (Java sources, main and test, or a message, service or rpc
 * of a {@code .proto} file), and the member after it, when there is one, a word of the file that
 * declares the type. Names of other projects (ND4J, the JDK, Netty, ...) are listed in
 * {@code .ci/doc-names-external.txt}. A class name is a CamelCase word: a capital, lower-case
 * letters or digits, another capital ({@code Rows} or {@code Redis} are not checked).
 * Fenced code blocks are skipped: they show code, whose names the compiler checks elsewhere.
 *
 * <p>Run from the repository root: {@code java .ci/DocNames.java}; exit 1 with each wrong name,
 * its file and line, else 0.
 */
public class DocNames {
  private static final Pattern SPAN = Pattern.compile("`([^`\\n]+)`");
  private static final Pattern NAME = Pattern.compile(
      "^@?([A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*)((?:[.#][A-Za-z_][A-Za-z0-9_]*)*)(?:\\(.*\\))?(?:\\[\\])?$");
  private static final Pattern JAVA_TYPE = Pattern.compile(
      "\\b(?:class|interface|enum|record|@interface)\\s+([A-Z][A-Za-z0-9_]*)");
  private static final Pattern PROTO_TYPE = Pattern.compile(
      "^\\s*(?:message|service|rpc|enum)\\s+([A-Z][A-Za-z0-9_]*)", Pattern.MULTILINE);
  private static final Pattern EXTENDS = Pattern.compile(
      "\\bclass\\s+([A-Z][A-Za-z0-9_]*)[^{;]*?\\bextends\\s+([A-Z][A-Za-z0-9_]*)");
  private static final Pattern WORD = Pattern.compile("[A-Za-z_][A-Za-z0-9_]*");

  public static void main(String[] args) throws IOException {
    Path root = Path.of(args.length > 0 ? args[0] : ".");
    Map<String, List<Path>> declaredIn = new HashMap<>();
    Map<String, String> parent = new HashMap<>();
    List<Path> docs = new ArrayList<>();
    try (Stream<Path> files = Files.walk(root)) {
      for (Path p : (Iterable<Path>) files::iterator) {
        String s = root.relativize(p).toString();
        if (s.contains("/target/") || s.startsWith("target/") || s.contains("node_modules")
            || s.startsWith(".git/") || s.startsWith("run/") || !Files.isRegularFile(p)) {
          continue;
        }
        if (s.endsWith(".java") || s.endsWith(".proto")) {
          String text = Files.readString(p);
          Matcher m = (s.endsWith(".java") ? JAVA_TYPE : PROTO_TYPE).matcher(text);
          while (m.find()) {
            declaredIn.computeIfAbsent(m.group(1), k -> new ArrayList<>()).add(p);
          }
          Matcher e = EXTENDS.matcher(text);
          while (e.find()) {
            parent.putIfAbsent(e.group(1), e.group(2));
          }
        } else if (s.endsWith(".md")) {
          docs.add(p);
        }
      }
    }
    Set<String> external = new HashSet<>();
    for (String line : Files.readAllLines(root.resolve(".ci/doc-names-external.txt"))) {
      String t = line.strip();
      if (!t.isEmpty() && !t.startsWith("#")) {
        external.add(t.split("\\s+")[0]);
      }
    }
    Map<Path, Set<String>> wordsOf = new HashMap<>();
    Map<String, String> wrong = new TreeMap<>();
    int checked = 0;
    for (Path doc : docs) {
      List<String> lines = Files.readAllLines(doc);
      boolean fenced = false;
      for (int i = 0; i < lines.size(); i++) {
        String line = lines.get(i);
        if (line.stripLeading().startsWith("```")) {
          fenced = !fenced;
          continue;
        }
        if (fenced) {
          continue;
        }
        Matcher span = SPAN.matcher(line);
        while (span.find()) {
          Matcher n = NAME.matcher(span.group(1).strip());
          if (!n.matches()) {
            continue;
          }
          String type = n.group(1);
          if (external.contains(type)) {
            continue;
          }
          checked++;
          String where = root.relativize(doc) + ":" + (i + 1);
          List<Path> files = declaredIn.get(type);
          if (files == null) {
            wrong.put(where + " `" + span.group(1) + "`", "no type " + type + " in the tree");
            continue;
          }
          String members = n.group(2);
          if (members.isEmpty()) {
            continue;
          }
          String member = members.substring(1).split("[.#]")[0];
          boolean found = false;
          // the member may be inherited: look in the type's file, then its superclasses' files
          String t = type;
          for (int depth = 0; depth < 8 && t != null && !found && declaredIn.containsKey(t);
              depth++, t = parent.get(t)) {
            for (Path f : declaredIn.get(t)) {
              found |= wordsOf.computeIfAbsent(f, DocNames::words).contains(member);
            }
          }
          if (!found) {
            wrong.put(where + " `" + span.group(1) + "`",
                "no " + member + " in " + root.relativize(files.get(0)));
          }
        }
      }
    }
    wrong.forEach((at, why) -> System.out.println(at + ": " + why));
    System.out.println(checked + " class names in backticks checked in " + docs.size()
        + " Markdown files; " + wrong.size() + " wrong");
    System.exit(wrong.isEmpty() ? 0 : 1);
  }

  private static Set<String> words(Path file) {
    try {
      Set<String> out = new HashSet<>();
      Matcher m = WORD.matcher(Files.readString(file));
      while (m.find()) {
        out.add(m.group());
      }
      return out;
    } catch (IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
  }
}
