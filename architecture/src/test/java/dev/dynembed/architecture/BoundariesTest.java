package dev.dynembed.architecture;

import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.tngtech.archunit.core.domain.JavaClass;
import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.domain.JavaModifier;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.ImportOption;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The modules' boundaries, on the compiled main classes of every module (a fully qualified use
 * of a type counts as much as an import):
 * <ul>
 *   <li>the client's surface is {@code dev.dynembed.table.client} and {@code client.spi}: no class
 *       outside the client's packages uses {@code client.internal}, and the public types of
 *       {@code client.internal} are exactly the ones the client's own packages share, each marked
 *       {@code @Internal};
 *   <li>dependencies point one way: the protocol knows no other module, the engine and the client
 *       only the protocol, the cluster map not the client, the shard (table-server) not the client,
 *       so that a shard never compiles against the code that calls it;
 *   <li>the table modules know nothing of ND4J, SameDiff's ops or the models;
 *   <li>the shard engine's helpers hold their narrow views of it, not the engine.
 * </ul>
 */
class BoundariesTest {
  private static final String CLIENT = "dev.dynembed.table.client..";
  private static final String INTERNAL = "dev.dynembed.table.client.internal";
  /**
   * The public types of client.internal, and why each is: the client's public packages use them
   * across package lines (Java has no narrower visibility between packages of one jar).
   */
  private static final Set<String> SHARED_INTERNALS = Set.of(
      "Futures",       // spi.Shard.await, spi.ShardedTableClient, Resharding, TableReads
      "GrpcShard",     // spi.RemoteShards, TableClients
      "Manifests",     // TableClients (the version in the jar's manifest)
      "ReadBatch",     // TableReads (a step's reads, one call per shard)
      "ShardedTable",  // spi.ShardedTableClient, TableClients, TableReads
      "SlotRouter",    // spi.ShardedTableClient.router()
      "WriteBatch");   // TableWrites (a step's writes, one call per shard)

  private static JavaClasses classes;

  @BeforeAll
  static void importEveryModule() {
    classes = new ClassFileImporter()
        .withImportOption(ImportOption.Predefined.DO_NOT_INCLUDE_TESTS)
        .importPackages("dev.dynembed");
    // a rule over classes that were not found would pass: one class of each module must be here
    for (String c : List.of("dev.dynembed.table.common.PackedKeys",
        "dev.dynembed.table.engine.ShardEngine", "dev.dynembed.table.server.TableServer",
        "dev.dynembed.table.client.TableClients", "dev.dynembed.table.cluster.ClusterMap",
        "dev.dynembed.table.cluster.client.EtcdTables", "dev.dynembed.table.tools.LocalShardProcesses",
        "dev.dynembed.table.embedded.LocalShard", "dev.dynembed.table.redis.RedisShard",
        "dev.dynembed.table.bench.TableBench", "dev.dynembed.job.JobCoordinator",
        "dev.dynembed.ops.DynamicEmbeddingLookup", "dev.dynembed.layers.Trainer",
        "dev.dynembed.word2vec.Word2Vec", "dev.dynembed.bownet.BowNet")) {
      assertTrue(classes.contain(c), c + " was not imported: is its module on this class path?");
    }
  }

  @Test
  void onlyTheClientsOwnPackagesUseItsInternals() {
    noClasses().that().resideOutsideOfPackage(CLIENT)
        .should().dependOnClassesThat().resideInAPackage(INTERNAL + "..")
        .because("the client's surface is dev.dynembed.table.client and client.spi")
        .check(classes);
  }

  @Test
  void theInternalsThatArePublic_areTheSharedOnes_andMarked() {
    Set<String> publicTypes = new TreeSet<>();
    for (JavaClass c : classes) {
      if (c.getPackageName().equals(INTERNAL) && c.isTopLevelClass() && c.getModifiers().contains(JavaModifier.PUBLIC)) {
        publicTypes.add(c.getSimpleName());
        assertTrue(c.isAnnotatedWith("dev.dynembed.table.client.Internal"),
            c.getName() + " is public but not marked @Internal");
      }
    }
    assertEquals(new TreeSet<>(SHARED_INTERNALS), publicTypes,
        "the public types of " + INTERNAL + " (a type made public that the client's own"
            + " packages do not need belongs package-private; one they need joins the list)");
  }

  @Test
  void dependenciesPointOneWay() {
    noClasses().that().resideInAPackage("dev.dynembed.table.common..")
        .should().dependOnClassesThat().resideInAnyPackage("dev.dynembed.table.engine..",
            "dev.dynembed.table.server..", CLIENT, "dev.dynembed.table.cluster..",
            "dev.dynembed.table.tools..", "dev.dynembed.table.embedded..")
        .because("the protocol is what every other module shares").check(classes);
    noClasses().that().resideInAnyPackage("dev.dynembed.table.engine..", CLIENT)
        .should().dependOnClassesThat().resideInAnyPackage("dev.dynembed.table.server..",
            "dev.dynembed.table.cluster..", "dev.dynembed.table.tools..",
            "dev.dynembed.table.embedded..", "dev.dynembed.table.redis..")
        .because("the engine and the client know only the protocol").check(classes);
    noClasses().that().resideInAPackage("dev.dynembed.table.engine..")
        .should().dependOnClassesThat().resideInAPackage(CLIENT).check(classes);
    noClasses().that().resideInAPackage("dev.dynembed.table.client..")
        .should().dependOnClassesThat().resideInAPackage("dev.dynembed.table.engine..")
        .check(classes);
    noClasses().that().resideInAnyPackage("dev.dynembed.table.server..",
            "dev.dynembed.table.cluster")
        .should().dependOnClassesThat().resideInAnyPackage(CLIENT, "dev.dynembed.table.tools..",
            "dev.dynembed.table.embedded..", "dev.dynembed.table.cluster.client..")
        .because("a shard and the cluster map never compile against the code that calls them")
        .check(classes);
  }

  /**
   * The shard engine's helpers hold the narrow view their nested {@code Engine} interface lists,
   * never the engine: no field or constructor parameter of theirs is a {@code ShardEngine}.
   */
  @Test
  void theEnginesHelpersHoldTheirNarrowViews() {
    String engine = "dev.dynembed.table.engine.ShardEngine";
    for (String helper : List.of("ShardCommands", "ShardCheckpoints", "ShardEvictions",
        "ShardIndexes", "SlotMoves")) {
      JavaClass c = classes.get("dev.dynembed.table.engine." + helper);
      assertTrue(c.getFields().stream().noneMatch(f -> f.getRawType().getName().equals(engine)),
          helper + " holds a ShardEngine field: give it its Engine view instead");
      assertTrue(c.getConstructors().stream().flatMap(k -> k.getRawParameterTypes().stream())
              .noneMatch(t -> t.getName().equals(engine)),
          helper + " takes a ShardEngine: give it its Engine view instead");
      assertTrue(c.getConstructors().stream().flatMap(k -> k.getRawParameterTypes().stream())
              .anyMatch(t -> t.getName().equals(c.getName() + "$Engine")),
          helper + " is not built on its nested Engine view");
    }
  }

  @Test
  void theTableModulesKnowNothingOfNd4j() {
    noClasses().that().resideInAPackage("dev.dynembed.table..")
        .should().dependOnClassesThat().resideInAnyPackage("org.nd4j..", "org.deeplearning4j..",
            "dev.dynembed.ops..", "dev.dynembed.layers..", "dev.dynembed.word2vec..",
            "dev.dynembed.bownet..")
        .check(classes);
  }
}
