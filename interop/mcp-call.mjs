// The hotel's "Try it" client: the official TypeScript SDK (pinned in
// package.json), which runs on any Node >= 18. From the repository root,
// after `npm ci --prefix interop`:
//
//   node interop/mcp-call.mjs URL TOKEN tools/list
//   node interop/mcp-call.mjs URL TOKEN tools/call TOOL '{"arg":1}'
//   node interop/mcp-call.mjs URL TOKEN resources/list
//   node interop/mcp-call.mjs URL TOKEN resources/read URI
//
// It prints the result as JSON on stdout.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token, method, name, args] = process.argv.slice(2);
const methods = ["tools/list", "tools/call", "resources/list", "resources/read", "prompts/list"];
if (!url || !token || !methods.includes(method)) {
  console.error(`usage: node mcp-call.mjs URL TOKEN (${methods.join(" | ")}) [NAME_OR_URI] [JSON_ARGS]`);
  process.exit(2);
}
const client = new Client({ name: "tenantmcp-try-it", version: "0.0.1" });
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
try {
  await client.connect(transport);
  let result;
  switch (method) {
    case "tools/list": result = await client.listTools(); break;
    case "tools/call": result = await client.callTool({ name, arguments: JSON.parse(args || "{}") }); break;
    case "resources/list": result = await client.listResources(); break;
    case "resources/read": result = await client.readResource({ uri: name }); break;
    case "prompts/list": result = await client.listPrompts(); break;
  }
  console.log(JSON.stringify(result, null, 2));
  await client.close();
} catch (err) {
  console.error(String((err && err.message) || err));
  process.exit(1);
}
