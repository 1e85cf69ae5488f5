// Validates generated documents against their JSON Schemas with ajv (draft 2020-12), an
// independent check of the grammar. Usage: node validate_with_ajv.cjs <ajv dir> <cases.json>
// cases.json: [{"name":..., "schema":{...}, "document":"<text>"}, ...]. Prints one line per
// failure and exits 1 if any.
const fs = require('fs');
const path = require('path');
const Ajv2020 = require(path.join(process.argv[2], 'dist', '2020')).default;
const cases = JSON.parse(fs.readFileSync(process.argv[3], 'utf8'));
const ajv = new Ajv2020({strict: false, allErrors: true});
let failures = 0;
for (const c of cases) {
  let doc;
  try {
    doc = JSON.parse(c.document);
  } catch (e) {
    console.log(`FAIL ${c.name}: not JSON (${e.message}): ${c.document}`);
    failures++;
    continue;
  }
  const validate = ajv.compile(c.schema);
  if (!validate(doc)) {
    console.log(`FAIL ${c.name}: ${ajv.errorsText(validate.errors)}: ${c.document}`);
    failures++;
  }
}
console.log(`${cases.length - failures}/${cases.length} documents valid`);
process.exit(failures > 0 ? 1 : 0);
