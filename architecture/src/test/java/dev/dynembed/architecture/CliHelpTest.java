package dev.dynembed.architecture;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.tngtech.archunit.core.domain.JavaClass;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.ImportOption;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;
import picocli.CommandLine.Model.ArgSpec;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Model.OptionSpec;

/**
 * Every option and parameter of every command line of the project (the CLIs, the benchmarks,
 * their subcommands and shared option classes) says in {@code --help} what it does: a command is
 * any class annotated {@code @Command}, found on the compiled classes of every module.
 */
class CliHelpTest {
  @Test
  void everyOptionOfEveryCommandIsDescribed() throws Exception {
    List<String> bare = new ArrayList<>();
    int commands = 0;
    int options = 0;
    for (JavaClass c : new ClassFileImporter()
        .withImportOption(ImportOption.Predefined.DO_NOT_INCLUDE_TESTS)
        .importPackages("dev.dynembed")) {
      if (!c.isAnnotatedWith(CommandLine.Command.class) || c.getModifiers().contains(
          com.tngtech.archunit.core.domain.JavaModifier.ABSTRACT)) {
        continue;
      }
      CommandSpec spec = new CommandLine(Class.forName(c.getName())).getCommandSpec();
      commands++;
      List<ArgSpec> args = new ArrayList<>(spec.options());
      args.addAll(spec.positionalParameters());
      for (ArgSpec a : args) {
        options++;
        if (String.join("", a.description()).isBlank()) {
          bare.add(spec.qualifiedName() + " " + (a instanceof OptionSpec o ? o.longestName()
              : a.paramLabel()) + " (" + c.getSimpleName() + ")");
        }
      }
    }
    assertTrue(commands >= 15, "found only " + commands + " commands");
    assertEquals(List.of(), bare, options + " options and parameters of " + commands
        + " commands; these have no description in --help");
  }
}
