// A client nobody on this project wrote: the official TypeScript SDK connects
// to the server over streamable HTTP with a bearer token, lists the tools and
// calls one. Usage: node ts-client.mjs [--pin VERSION] URL TOKEN TOOL JSON_ARGS
// Without --pin it is the v1 SDK (@modelcontextprotocol/sdk, the 2025
// initialize handshake); with --pin it is the v2 client
// (@modelcontextprotocol/client) pinned to that protocol revision: it must
// find it in server/discover, with no fallback.
// It prints one JSON object on stdout for the Go test to assert on.
let argv = process.argv.slice(2);
let pin;
if (argv[0] === "--pin") {
  pin = argv[1];
  argv = argv.slice(2);
}
const [url, token, tool, args] = argv;
if (!url || !token || !tool) {
  console.error("usage: node ts-client.mjs [--pin VERSION] URL TOKEN TOOL [JSON_ARGS]");
  process.exit(2);
}

const { Client, StreamableHTTPClientTransport } = pin
  ? await import("@modelcontextprotocol/client")
  : {
      ...(await import("@modelcontextprotocol/sdk/client/index.js")),
      ...(await import("@modelcontextprotocol/sdk/client/streamableHttp.js")),
    };
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client({ name: "tenantmcp-interop", version: "0.0.1" },
  pin ? { versionNegotiation: { mode: { pin } } } : undefined);
try {
  await client.connect(transport);
  const tools = await client.listTools();
  const result = await client.callTool({ name: tool, arguments: JSON.parse(args || "{}") });
  console.log(JSON.stringify({
    server: client.getServerVersion(),
    protocolVersion: pin ? client.getNegotiatedProtocolVersion() : undefined,
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
