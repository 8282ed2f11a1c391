// Oracle for json::format_number: prints JSON.stringify(x) for each double in FILE, one per line.
// FILE holds one IEEE-754 bit pattern per line as 16 hex digits (most significant first), so the
// doubles reach ECMAScript exactly, with no decimal parsing in between.
//
//   node jcs_number_oracle.cjs doubles.hex
'use strict';

const fs = require('fs');

const file = process.argv[2];
if (!file) {
  console.error('usage: node jcs_number_oracle.cjs FILE');
  process.exit(2);
}

const bits = Buffer.alloc(8);
const out = [];
for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
  if (line === '') continue;
  if (!/^[0-9a-fA-F]{16}$/.test(line)) {
    console.error(`jcs_number_oracle: not 16 hex digits: ${JSON.stringify(line)}`);
    process.exit(2);
  }
  bits.write(line, 0, 'hex');
  out.push(JSON.stringify(bits.readDoubleBE(0)));
}
process.stdout.write(out.join('\n') + (out.length ? '\n' : ''));
