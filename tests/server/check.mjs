// The checks of the npm clients' tests (openai_client.mjs, openai_tools.mjs, ollama_client.mjs):
// each prints "ok" or "FAIL" with what it checks; report() prints the count and exits 1 on a failure.
let passed = 0;
let failed = 0;

export function check(ok, what, detail = '') {
  if (ok) {
    passed++;
    console.log(`ok   ${what}`);
  } else {
    failed++;
    console.log(`FAIL ${what} ${detail}`);
  }
}

export function report() {
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed === 0 ? 0 : 1);
}
