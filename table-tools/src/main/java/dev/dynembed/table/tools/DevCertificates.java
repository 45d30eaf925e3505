package dev.dynembed.table.tools;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.Key;
import java.security.KeyStore;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;

/**
 * A throw-away certificate authority, made with the JDK's own keytool, for trying TLS on one
 * machine, for tests and for the benchmarks: a CA, server certificates for 127.0.0.1/localhost,
 * client certificates by CN, as PEM files (chain + PKCS#8 key) the way an operator hands them to
 * table-server and its clients. Not for production: the keys sit unencrypted beside the CA's.
 */
public final class DevCertificates {
  private static final String PASS = "changeit";
  public final Path dir;
  public final Path caPem;

  /** A certificate chain (leaf + CA) and its private key, PEM. */
  public record Identity(Path chain, Path key) {}

  /** Creates a CA in {@code dir} ({@code ca.pem}). */
  public DevCertificates(Path dir) throws Exception {
    this.dir = Files.createDirectories(dir);
    keytool("-genkeypair", "-alias", "ca", "-keyalg", "RSA", "-keysize", "2048", "-dname",
        "CN=dynembed-test-ca", "-ext", "bc:c", "-validity", "3", "-keystore", p12("ca"));
    caPem = dir.resolve("ca.pem");
    keytool("-exportcert", "-rfc", "-alias", "ca", "-keystore", p12("ca"), "-file",
        caPem.toString());
  }

  /**
   * A certificate signed by this CA: for a server (127.0.0.1, localhost; also a client of the
   * other processes of a replicated shard, which it follows with it) or a client.
   */
  public Identity issue(String cn, boolean server) throws Exception {
    keytool("-genkeypair", "-alias", "leaf", "-keyalg", "RSA", "-keysize", "2048", "-dname",
        "CN=" + cn, "-validity", "3", "-keystore", p12(cn));
    Path csr = dir.resolve(cn + ".csr");
    keytool("-certreq", "-alias", "leaf", "-keystore", p12(cn), "-file", csr.toString());
    Path leaf = dir.resolve(cn + ".leaf.pem");
    List<String> sign = new ArrayList<>(List.of("-gencert", "-alias", "ca", "-keystore",
        p12("ca"), "-infile", csr.toString(), "-outfile", leaf.toString(), "-rfc", "-validity",
        "3"));
    if (server) {
      sign.addAll(List.of("-ext", "san=ip:127.0.0.1,dns:localhost", "-ext",
          "eku=serverAuth,clientAuth"));
    } else {
      sign.addAll(List.of("-ext", "eku=clientAuth"));
    }
    keytool(sign.toArray(new String[0]));
    Path chain = dir.resolve(cn + ".pem");
    Files.writeString(chain, Files.readString(leaf) + Files.readString(caPem));
    KeyStore ks = KeyStore.getInstance("PKCS12");
    try (InputStream in = Files.newInputStream(Path.of(p12(cn)))) {
      ks.load(in, PASS.toCharArray());
    }
    Key k = ks.getKey("leaf", PASS.toCharArray());
    Path key = dir.resolve(cn + ".key");
    Files.writeString(key, "-----BEGIN PRIVATE KEY-----\n"
        + Base64.getMimeEncoder(64, "\n".getBytes(StandardCharsets.US_ASCII))
            .encodeToString(k.getEncoded())
        + "\n-----END PRIVATE KEY-----\n");
    return new Identity(chain, key);
  }

  private String p12(String name) {
    return dir.resolve(name + ".p12").toString();
  }

  private void keytool(String... args) throws IOException, InterruptedException {
    List<String> cmd = new ArrayList<>(List.of(
        Path.of(System.getProperty("java.home"), "bin", "keytool").toString()));
    cmd.addAll(List.of(args));
    cmd.addAll(List.of("-storepass", PASS, "-storetype", "PKCS12", "-noprompt"));
    Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    if (p.waitFor() != 0) {
      throw new IOException("keytool " + String.join(" ", args) + " failed:\n" + out);
    }
  }
}
