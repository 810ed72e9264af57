// The part of "strict" that tsc cannot enforce: the hand-written sources (src/, not the
// generated src/generated/) may not opt out of the types the contract generates. Refused:
// `any`, type assertions (`x as T`, `<T>x`; `as const` is not an assertion and stays allowed),
// non-null assertions (`x!`), and @ts-ignore / @ts-expect-error / @ts-nocheck comments.
// It walks the TypeScript syntax tree (the compiler the build already uses), so words in
// comments and strings do not count. Usage: node scripts/no-escape-hatches.mjs [files...]
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import ts from "typescript";

const root = new URL("..", import.meta.url).pathname;

function sources(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === "generated" ? [] : sources(path);
    return entry.name.endsWith(".ts") ? [path] : [];
  });
}

function check(path) {
  const text = readFileSync(path, "utf8");
  const file = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
  const found = [];
  const at = (node, what) => {
    const { line, character } = file.getLineAndCharacterOfPosition(node.getStart(file));
    found.push(`${relative(root, path)}:${line + 1}:${character + 1}: ${what}`);
  };
  const visit = (node) => {
    if (node.kind === ts.SyntaxKind.AnyKeyword) at(node, "`any`");
    else if (ts.isAsExpression(node) && !(ts.isTypeReferenceNode(node.type)
             && node.type.typeName.getText(file) === "const")) at(node, "type assertion `as`");
    else if (ts.isTypeAssertionExpression(node)) at(node, "type assertion `<T>`");
    else if (ts.isNonNullExpression(node)) at(node, "non-null assertion `!`");
    ts.forEachChild(node, visit);
  };
  visit(file);
  for (const match of text.matchAll(/@ts-(ignore|expect-error|nocheck)/g)) {
    const { line } = file.getLineAndCharacterOfPosition(match.index);
    found.push(`${relative(root, path)}:${line + 1}: @ts-${match[1]}`);
  }
  return found;
}

const files = process.argv.length > 2 ? process.argv.slice(2) : sources(join(root, "src"));
const found = files.flatMap(check);
for (const line of found) console.error(line);
if (found.length > 0) {
  console.error(`no-escape-hatches: ${found.length} found; the types come from openapi.yaml, ` +
                "narrow `unknown` with checks instead");
  process.exit(1);
}
console.error(`no-escape-hatches: ${files.length} files clean`);
