// A client nobody on this project wrote: the official TypeScript SDK connects
// to the server over streamable HTTP with a bearer token, lists the tools and
// calls one. Usage: node ts-client.mjs URL TOKEN TOOL JSON_ARGS
// It prints one JSON object on stdout for the Go test to assert on.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token, tool, args] = process.argv.slice(2);
if (!url || !token || !tool) {
  console.error("usage: node ts-client.mjs URL TOKEN TOOL [JSON_ARGS]");
  process.exit(2);
}

const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client({ name: "tenantmcp-interop", version: "0.0.1" });
try {
  await client.connect(transport);
  const tools = await client.listTools();
  const result = await client.callTool({ name: tool, arguments: JSON.parse(args || "{}") });
  console.log(JSON.stringify({
    server: client.getServerVersion(),
    tools: tools.tools.map((t) => t.name),
    isError: result.isError ?? false,
    structuredContent: result.structuredContent ?? null,
    text: (result.content ?? []).filter((c) => c.type === "text").map((c) => c.text),
  }));
  await client.close();
} catch (err) {
  console.error(String(err && err.stack || err));
  process.exit(1);
}
