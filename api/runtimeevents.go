package api

// Event types of the Claude runtime's custom tools and compaction, in the
// hosted API's shape.
const (
	// EventAgentThreadContextCompacted marks where the conversation sent to
	// the model was compacted; its content is the summary the model wrote
	// of everything before it (the hosted API's event carries no more than
	// its id and time, so clients that know only that read it unharmed).
	EventAgentThreadContextCompacted = "agent.thread_context_compacted"
	// EventAgentCustomToolUse is the model's call to one of the agent's
	// custom tools; the application answers it with a user.custom_tool_result.
	EventAgentCustomToolUse = "agent.custom_tool_use"
	// EventUserCustomToolResult answers the agent.custom_tool_use named by
	// custom_tool_use_id.
	EventUserCustomToolResult = "user.custom_tool_result"
)
