// The steps of an SDK client script: each step's result goes into a JSON summary, each failed
// check (or a step that throws) into its failure list; finish() prints the summary and exits
// non-zero when anything failed. Shared by the *_client.mjs scripts the C++ tests run.
//
//   const { check, step, finish } = sdkSteps();
//   await step('chat', async () => { const r = await client.chat...; check(r.id, 'chat: id'); return r.usage; });
//   finish();
export function sdkSteps() {
  const summary = {};
  const failures = [];
  return {
    check(cond, what) {
      if (!cond) failures.push(what);
      return cond;
    },
    async step(name, fn) {
      try {
        summary[name] = await fn();
      } catch (e) {
        failures.push(`${name}: ${e && e.stack ? e.stack : e}`);
      }
    },
    finish() {
      summary.failures = failures;
      console.log(JSON.stringify(summary));
      process.exit(failures.length === 0 ? 0 : 1);
    },
  };
}
