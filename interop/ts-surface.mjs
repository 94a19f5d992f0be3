// A client nobody on this project wrote, over the whole MCP surface: the
// official TypeScript SDK connects over streamable HTTP with a bearer
// token and runs a list of operations (tools, resources, prompts,
// completions), answering elicitation requests as told.
// Usage: node ts-surface.mjs URL TOKEN ELICIT JSON_OPS
//   ELICIT: "accept" (allow=true), "decline", or "none" (no elicitation capability)
//   JSON_OPS: [{"op":"listTools"}, {"op":"readResource","uri":"…"}, {"op":"callTool","name":"…","arguments":{…}}, …]
// It prints {"results":[{"ok":…}|{"error":{"code","message","data"}}], "elicited":["message", …]} on stdout.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const [url, token, elicit, opsJSON] = process.argv.slice(2);
if (!url || !token || !elicit || !opsJSON) {
  console.error("usage: node ts-surface.mjs URL TOKEN accept|decline|none JSON_OPS");
  process.exit(2);
}

const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const capabilities = elicit === "none" ? {} : { elicitation: {} };
const client = new Client({ name: "tenantmcp-interop-surface", version: "0.0.1" }, { capabilities });
const elicited = [];
if (elicit !== "none") {
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    elicited.push(req.params.message);
    return elicit === "accept" ? { action: "accept", content: { allow: true } } : { action: "decline" };
  });
}

const run = {
  listTools: () => client.listTools(),
  listResources: () => client.listResources(),
  listResourceTemplates: () => client.listResourceTemplates(),
  readResource: (o) => client.readResource({ uri: o.uri }),
  listPrompts: () => client.listPrompts(),
  getPrompt: (o) => client.getPrompt({ name: o.name, arguments: o.arguments }),
  complete: (o) => client.complete({ ref: o.ref, argument: o.argument }),
  callTool: (o) => client.callTool({ name: o.name, arguments: o.arguments ?? {}, _meta: o.meta }),
};

try {
  await client.connect(transport);
  const results = [];
  for (const o of JSON.parse(opsJSON)) {
    try {
      results.push({ ok: await run[o.op](o) });
    } catch (err) {
      results.push({ error: { code: err.code ?? null, message: String(err.message ?? err), data: err.data ?? null } });
    }
  }
  console.log(JSON.stringify({ results, elicited }));
  await client.close();
} catch (err) {
  console.error(String((err && err.stack) || err));
  process.exit(1);
}
