# Shared by the bin/ scripts: locate the repo and build a module's runnable jar on first use.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
JAVA="${JAVA:-java}"
# the SIMD kernels (FloatKernels) use the JDK's vector module; without it they fall back to loops
SIMD="--add-modules jdk.incubator.vector"

# jar_of MODULE: prints the path of the module's runnable jar (classifier "all"), building it if
# absent.
jar_of() {
  local module="$1" jar
  jar="$(ls "$ROOT/$module"/target/*-all.jar 2>/dev/null | sed -n 1p || true)"
  if [ -z "$jar" ]; then
    echo "building $module (first run)..." >&2
    (cd "$ROOT" && mvn -q -B -DskipTests -pl "$module" -am package >&2) || {
      echo "build of $module failed" >&2; exit 1; }
    jar="$(ls "$ROOT/$module"/target/*-all.jar | sed -n 1p)"
  fi
  printf '%s\n' "$jar"
}
