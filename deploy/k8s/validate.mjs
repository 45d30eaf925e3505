// Validates Kubernetes manifests against the API's OpenAPI schemas, offline: every document's
// apiVersion/kind is looked up in the npm package kubernetes-models (schemas generated from the
// Kubernetes OpenAPI spec) and checked with its validate(), which rejects unknown fields, wrong
// types and missing required fields. Usage: node validate.mjs FILE.yaml...
import { readFileSync } from "node:fs";
import yaml from "js-yaml";

let failed = 0;
let checked = 0;
for (const file of process.argv.slice(2)) {
  const docs = yaml.loadAll(readFileSync(file, "utf8")).filter((d) => d != null);
  for (const [i, doc] of docs.entries()) {
    const where = `${file} document ${i + 1} (${doc.kind ?? "no kind"} ${doc.metadata?.name ?? ""})`;
    if (!doc.apiVersion || !doc.kind) {
      console.error(`${where}: no apiVersion or kind`);
      failed++;
      continue;
    }
    const [group, version] = doc.apiVersion.includes("/") ? doc.apiVersion.split("/") : [null, doc.apiVersion];
    const module = group ? `kubernetes-models/${group}/${version}` : `kubernetes-models/${version}`;
    let Kind;
    try {
      Kind = (await import(module))[doc.kind];
    } catch (e) {
      Kind = undefined;
    }
    if (!Kind) {
      console.error(`${where}: unknown apiVersion/kind ${doc.apiVersion} ${doc.kind}`);
      failed++;
      continue;
    }
    try {
      new Kind(doc).validate();
      checked++;
    } catch (e) {
      console.error(`${where}: ${e.message}`);
      failed++;
    }
  }
}
console.log(`k8s manifests: ${checked} valid, ${failed} invalid`);
process.exit(failed > 0 || checked === 0 ? 1 : 0);
