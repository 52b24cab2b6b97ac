package api

// Event types of the Claude runtime's MCP tool calls, in the hosted API's
// shape: the server makes the call itself, so both halves are the agent's.
const (
	// EventAgentMCPToolUse is the model's call to a tool of one of the
	// agent's MCP servers (mcp_server_name, name, input).
	EventAgentMCPToolUse = "agent.mcp_tool_use"
	// EventAgentMCPToolResult is what the MCP server answered (or why it
	// could not), for the agent.mcp_tool_use named by mcp_tool_use_id.
	EventAgentMCPToolResult = "agent.mcp_tool_result"
)

// MaxMCPServers bounds an agent's mcp_servers, as the hosted API does.
const MaxMCPServers = 20

// MCPToolsetType is the tools entry that offers an MCP server's tools.
const MCPToolsetType = "mcp_toolset"
