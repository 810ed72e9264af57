/**
 * Run-time contract check: every answer the bot receives is validated against openapi.yaml.
 *
 * The generated types (src/generated/openapi.ts) only say what the contract promises at build
 * time; this says whether the service keeps the promise. For each answer we find the operation
 * (path template + method) and the documented response (exact status, then `4XX`, then
 * `default`), check the media type is one it documents, that each documented header present
 * fits its schema, and validate the body with Ajv against the response's schema. OpenAPI 3.1
 * schemas are JSON Schema 2020-12, so the whole document is handed to Ajv under one base URI:
 * `$ref: '#/components/schemas/X'` then resolves inside it as written.
 *
 * A mismatch throws a ContractError from the openapi-fetch middleware, so the request that got
 * the answer fails loudly instead of handing the bot a value its types lie about.
 */

import { readFileSync } from "node:fs";
import { Ajv2020 } from "ajv/dist/2020.js";
import type { ValidateFunction } from "ajv";
import type { Middleware } from "openapi-fetch";
import { parse } from "yaml";

const BASE = "urn:allfours-arena:openapi";

export class ContractError extends Error {
  override name = "ContractError";
}

type Json = Record<string, unknown>;

function isObject(v: unknown): v is Json {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function child(v: unknown, key: string): unknown {
  return isObject(v) ? v[key] : undefined;
}

/** A JSON pointer token, escaped for use in a URI fragment. */
function token(s: string): string {
  return encodeURIComponent(s.replaceAll("~", "~0").replaceAll("/", "~1"));
}

export class Contract {
  /** answers checked, and what was wrong with each one that did not fit */
  checked = 0;
  readonly failures: string[] = [];
  private readonly ajv: Ajv2020;
  private readonly doc: Json;
  private readonly validators = new Map<string, ValidateFunction>();

  constructor(yamlText: string) {
    const doc: unknown = parse(yamlText);
    if (!isObject(doc) || typeof doc["openapi"] !== "string" || !doc["openapi"].startsWith("3.1")) {
      throw new ContractError("not an OpenAPI 3.1 document");
    }
    this.doc = doc;
    // strict: false — OpenAPI adds annotation keywords JSON Schema does not know (example,
    // discriminator, xml); they must not stop validation of the keywords that matter.
    this.ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false });
    this.ajv.addSchema({ ...doc, $id: BASE });
  }

  static fromFile(path: string): Contract {
    return new Contract(readFileSync(path, "utf8"));
  }

  /** What is wrong with this answer, or null if it fits the contract. */
  check(method: string, pathTemplate: string, status: number, headers: Headers,
        body: unknown): string | null {
    const where = `${method} ${pathTemplate} -> ${status}`;
    const op = child(child(this.doc["paths"], pathTemplate), method.toLowerCase());
    if (op === undefined) return `${where}: no such operation in openapi.yaml`;
    const responses = child(op, "responses");
    const candidates = [String(status), `${String(status).charAt(0)}XX`, "default"];
    const code = candidates.find((c) => child(responses, c) !== undefined);
    if (code === undefined) return `${where}: status not documented`;
    const response = child(responses, code);
    const pointer = ["paths", pathTemplate, method.toLowerCase(), "responses", code];
    const problems: string[] = [];

    const documentedHeaders = child(response, "headers");
    if (isObject(documentedHeaders)) {
      for (const [name, spec] of Object.entries(documentedHeaders)) {
        const value = headers.get(name);
        if (value === null) {
          if (child(spec, "required") === true) problems.push(`header ${name} is missing`);
          continue;
        }
        if (child(spec, "schema") === undefined) continue;
        const error = this.validate([...pointer, "headers", name, "schema"], value);
        if (error !== null) problems.push(`header ${name}: ${error}`);
      }
    }

    const content = child(response, "content");
    if (isObject(content)) {
      const mediaType = (headers.get("content-type") ?? "").split(";")[0]?.trim() ?? "";
      const media = content[mediaType];
      if (media === undefined) {
        problems.push(`media type ${JSON.stringify(mediaType)} not documented ` +
                      `(${Object.keys(content).join(", ")})`);
      } else if (child(media, "schema") !== undefined) {
        const error = this.validate([...pointer, "content", mediaType, "schema"], body);
        if (error !== null) problems.push(`body: ${error}`);
      }
    }
    return problems.length === 0 ? null : `${where}: ${problems.join("; ")}`;
  }

  private validate(pointer: string[], value: unknown): string | null {
    const ref = `${BASE}#/${pointer.map(token).join("/")}`;
    let validate = this.validators.get(ref);
    if (validate === undefined) {
      validate = this.ajv.getSchema(ref);
      if (validate === undefined) throw new ContractError(`openapi.yaml has no schema at ${ref}`);
      this.validators.set(ref, validate);
    }
    if (validate(value)) return null;
    return this.ajv.errorsText(validate.errors, { dataVar: "answer" });
  }

  /**
   * openapi-fetch middleware: checks every answer (the body is read from a clone, so the
   * caller still gets it) and throws a ContractError on a mismatch.
   */
  middleware(): Middleware {
    return {
      onResponse: async ({ request, response, schemaPath }) => {
        const text = await response.clone().text();
        let body: unknown = text;
        if (/json/.test(response.headers.get("content-type") ?? "") && text !== "") {
          try {
            body = JSON.parse(text);
          } catch {
            this.fail(`${request.method} ${schemaPath} -> ${response.status}: body is not JSON`);
          }
        }
        this.checked += 1;
        const failure = this.check(request.method, schemaPath, response.status,
                                   response.headers, body);
        if (failure !== null) this.fail(failure);
        return undefined;
      },
    };
  }

  private fail(message: string): never {
    this.failures.push(message);
    throw new ContractError(`answer does not match openapi.yaml: ${message}`);
  }
}
