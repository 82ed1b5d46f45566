// hypd judged by the official MCP TypeScript SDK (the pinned
// @modelcontextprotocol/sdk of tests/mcp/package.json) as a client:
//
//   node sdk_client.mjs stdio LABEL COMMAND [ARGS...]   spawns COMMAND (hypd mcp ...)
//   node sdk_client.mjs http LABEL URL                  Streamable HTTP at URL
//
// Output: one line per check, "ok - LABEL: ..." or "not ok - LABEL: ... #
// why" (run.sh numbers them and writes the plan). A failed check never
// stops the run. Exit 0 whatever the checks say; 1 only if the harness
// itself breaks. The server must offer hypd's built-in tools; the stdio
// server runs with the tree's skills/ in its working directory.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpError } from "@modelcontextprotocol/sdk/types.js";

const [mode, label, target, ...rest] = process.argv.slice(2);
if (!["stdio", "http"].includes(mode) || !label || !target) {
  console.error("usage: node sdk_client.mjs stdio LABEL COMMAND [ARGS...] | http LABEL URL");
  process.exit(1);
}

function say(ok, what, why) {
  const detail = why ? ` # ${String(why).split("\n")[0].slice(0, 300)}` : "";
  process.stdout.write(`${ok ? "ok" : "not ok"} - ${label}: ${what}${ok ? "" : detail}\n`);
}

// check(what, fn): fn returns true, or a string saying what was wrong, or throws
async function check(what, fn) {
  try {
    const r = await fn();
    if (r === true) say(true, what);
    else say(false, what, r === false || r === undefined ? "the check failed" : r);
  } catch (e) {
    say(false, what, e instanceof Error ? e.message : String(e));
  }
}

const client = new Client({ name: "hypd-sdk-test", version: "1.0.0" });
const transport = mode === "stdio"
  ? new StdioClientTransport({ command: target, args: rest, env: { ...process.env }, cwd: process.cwd(),
      stderr: "pipe" })
  : new StreamableHTTPClientTransport(new URL(target));
let stderr = "";
if (mode === "stdio" && transport.stderr) transport.stderr.on("data", (d) => { stderr += d; });

let connected = false;
await check("the SDK client connects (initialize, initialized)", async () => {
  await client.connect(transport);
  connected = true;
  const info = client.getServerVersion();
  const caps = client.getServerCapabilities();
  if (info?.name !== "hypd") return `serverInfo ${JSON.stringify(info)}`;
  if (!caps?.tools || !caps?.prompts || !caps?.resources || !caps?.logging) return `capabilities ${JSON.stringify(caps)}`;
  if (!client.getInstructions()?.includes("operation_id")) return "no instructions";
  return true;
});
if (!connected) {
  if (stderr) process.stdout.write(stderr.split("\n").slice(-10).map((l) => `# ${l}`).join("\n") + "\n");
  process.exit(0);
}

if (mode === "http") {
  await check("the negotiated protocol version is the SDK's latest, 2025-11-25", async () =>
    transport.protocolVersion === "2025-11-25" || `negotiated ${transport.protocolVersion}`);
  await check("the transport holds a session id", async () => typeof transport.sessionId === "string" || "none");
}

await check("ping", async () => { await client.ping(); return true; });

let tools = [];
await check("tools/list: hypd's tools with schemas and annotations", async () => {
  tools = (await client.listTools()).tools;
  const ol = tools.find((t) => t.name === "operation_list");
  if (!ol) return `no operation_list in ${tools.map((t) => t.name).join(", ")}`;
  if (ol.inputSchema?.type !== "object" || !ol.inputSchema.properties?.limit) return "operation_list inputSchema";
  if (ol.outputSchema?.type !== "object") return "operation_list outputSchema";
  if (ol.annotations?.readOnlyHint !== true || ol.annotations?.openWorldHint !== true) return "read annotations";
  return true;
});

await check("a staged tool names its status tool and is annotated as mutating and idempotent", async () => {
  const c = tools.find((t) => t.name === "cluster_create_eks");
  if (!c) return "no cluster_create_eks";
  if (!c.description.includes("Mutating: returns an operation_id at once; call cluster_get_creation_status every"))
    return c.description.slice(-200);
  if (c.annotations?.readOnlyHint !== false || c.annotations?.idempotentHint !== true) return JSON.stringify(c.annotations);
  return true;
});

await check("tools/call of a read tool: structuredContent (checked by the SDK against outputSchema) and its text", async () => {
  const r = await client.callTool({ name: "operation_list", arguments: { limit: 5 } });
  if (r.isError) return `isError: ${r.content?.[0]?.text}`;
  if (!Array.isArray(r.structuredContent?.operations)) return JSON.stringify(r.structuredContent);
  const text = JSON.parse(r.content[0].text);
  return JSON.stringify(text) === JSON.stringify(r.structuredContent) || "text and structuredContent differ";
});

await check("a validation failure is a result with isError that names the field", async () => {
  const r = await client.callTool({ name: "operation_list", arguments: { limit: 0, status: "bogus" } });
  if (r.isError !== true) return `not an error: ${JSON.stringify(r).slice(0, 200)}`;
  const text = r.content?.[0]?.text ?? "";
  if (!text.includes("limit: must be at least 1") || !text.includes("status: must be one of")) return text;
  const fields = r.structuredContent?.error?.fields?.map((f) => f.field);
  return JSON.stringify(fields) === '["limit","status"]' || JSON.stringify(fields);
});

await check("an unknown tool is a protocol error -32602", async () => {
  try {
    await client.callTool({ name: "no_such_tool", arguments: {} });
    return "no error";
  } catch (e) {
    return (e instanceof McpError && e.code === -32602) || `${e.code}: ${e.message}`;
  }
});

await check("an unknown method is -32601", async () => {
  try {
    await client.complete({ ref: { type: "ref/prompt", name: "create-eks" }, argument: { name: "x", value: "" } });
    return "no error";
  } catch (e) {
    return (e instanceof McpError && e.code === -32601) || `${e.code}: ${e.message}`;
  }
});

if (mode === "stdio") {
  await check("prompts are the skills: create-eks with its body", async () => {
    const list = (await client.listPrompts()).prompts;
    const p = list.find((x) => x.name === "create-eks");
    if (!p || !p.description) return `prompts: ${JSON.stringify(list).slice(0, 200)}`;
    const g = await client.getPrompt({ name: "create-eks" });
    const text = g.messages?.[0]?.content?.text ?? "";
    return (g.messages[0].role === "user" && text.includes("cluster_create_eks")) || text.slice(0, 200);
  });
}

await check("resources: the operation template is offered and the list is well formed", async () => {
  const t = (await client.listResourceTemplates()).resourceTemplates;
  if (!t.some((x) => x.uriTemplate === "hypd://operations/{id}")) return JSON.stringify(t);
  const l = (await client.listResources()).resources;
  return Array.isArray(l) || "no resources array";
});

await check("an unknown resource is -32002", async () => {
  try {
    await client.readResource({ uri: "hypd://operations/op-0000000000000000" });
    return "no error";
  } catch (e) {
    return (e instanceof McpError && e.code === -32002) || `${e.code}: ${e.message}`;
  }
});

await check("logging/setLevel answers {}", async () => {
  const r = await client.setLoggingLevel("info");
  return Object.keys(r).length === 0 || JSON.stringify(r);
});

// with MUTATING=1 (a server with the sandbox behind it): a staged tool answers
// with an operation at once, and its status tool reports it to the end
if (process.env.MUTATING === "1") {
  await check("a mutating tool returns an operation; its status tool follows it to succeeded", async () => {
    const r = await client.callTool({ name: "cluster_create_eks", arguments: { cluster_tag: "sdk" } });
    if (r.isError) return `isError: ${r.content?.[0]?.text}`;
    const acc = r.structuredContent;
    if (!acc?.operation_id || acc.status_tool !== "cluster_get_creation_status") return JSON.stringify(acc);
    for (let i = 0; i < 600; i++) {
      const s = await client.callTool({ name: acc.status_tool, arguments: { operation_id: acc.operation_id } });
      if (s.isError) return `status isError: ${s.content?.[0]?.text}`;
      const st = s.structuredContent;
      if (st.status === "succeeded") {
        return (st.result?.cluster_name === "hypd-sdk" && st.aws?.eks_status === "ACTIVE") || JSON.stringify(st);
      }
      if (st.status !== "running") return `ended ${st.status}: ${JSON.stringify(st.error)}`;
      await new Promise((res) => setTimeout(res, 100));
    }
    return "still running after 60 s";
  });
}

await check("the client closes cleanly", async () => { await client.close(); return true; });
process.exit(0);
