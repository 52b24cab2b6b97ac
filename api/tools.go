package api

// AgentToolsetType is the type of the tool entry that gives an agent the
// built-in tools ({"type":"agent_toolset_20260401"} in an agent's tools).
const AgentToolsetType = "agent_toolset_20260401"

// ToolDefinition describes one built-in tool to a model: its name, what it
// does, and the JSON Schema of the input it accepts. The list is wire
// contract, so it lives here: the server's model runtime offers exactly
// these tools with these schemas, and the worker's toolset runs exactly
// these (a test there holds each schema to the input the tool decodes).
type ToolDefinition struct {
	Name        string
	Description string
	// InputSchema is a JSON Schema object: "type", "properties" and
	// "required" (a []string, empty when nothing is required).
	InputSchema map[string]any
}

// AgentTools returns the tools of agent_toolset_20260401 in a stable order.
// Each call builds a fresh list, so a caller may change what it gets.
func AgentTools() []ToolDefinition {
	str := func(desc string) map[string]any { return map[string]any{"type": "string", "description": desc} }
	boolean := func(desc string) map[string]any { return map[string]any{"type": "boolean", "description": desc} }
	schema := func(props map[string]any, required ...string) map[string]any {
		if required == nil {
			required = []string{}
		}
		return map[string]any{"type": "object", "properties": props, "required": required}
	}
	return []ToolDefinition{
		{"bash", "Run a command in a persistent bash shell (working directory, variables and functions carry over between calls). The result is stdout and stderr interleaved; a failing command ends with its exit code.",
			schema(map[string]any{
				"command":    str("The command to run."),
				"restart":    boolean("Restart the shell instead of running a command."),
				"timeout_ms": map[string]any{"type": "integer", "description": "How long the command may run, in milliseconds (default 120000)."},
			})},
		{"read", "Read a UTF-8 text file, exactly as stored. Memory stores are folders under /mnt/memory.",
			schema(map[string]any{
				"file_path":  str("Absolute path of the file, or relative to the working directory."),
				"view_range": map[string]any{"type": "array", "items": map[string]any{"type": "integer"}, "minItems": 2, "maxItems": 2, "description": "Optional [start, end] lines, 1-based and inclusive; an end of 0 or less means the end of the file."},
			}, "file_path")},
		{"write", "Create or replace a whole file (missing folders are created).",
			schema(map[string]any{
				"file_path": str("Absolute path of the file, or relative to the working directory."),
				"content":   str("The file's new content."),
			}, "file_path", "content")},
		{"edit", "Replace old_string with new_string in a file; old_string must occur exactly once unless replace_all is set.",
			schema(map[string]any{
				"file_path":   str("Absolute path of the file, or relative to the working directory."),
				"old_string":  str("The exact text to replace."),
				"new_string":  str("The replacement text."),
				"replace_all": boolean("Replace every occurrence."),
			}, "file_path", "old_string", "new_string")},
		{"glob", "List files matching a glob pattern (** matches any number of folders), newest first.",
			schema(map[string]any{
				"pattern": str("The glob pattern, e.g. **/*.md."),
				"path":    str("The folder to search (default: the working directory)."),
			}, "pattern")},
		{"grep", "Search file contents with a Go (RE2) regular expression; results are path:line:text.",
			schema(map[string]any{
				"pattern": str("The regular expression; (?i) makes it case-insensitive."),
				"path":    str("The folder or file to search (default: the working directory)."),
			}, "pattern")},
	}
}

// IsAgentTool reports whether name is one of [AgentTools]. The official
// SDK's tool runner leaves a call to any other name unanswered (another
// client may own it), and a worker that wants the same split asks this.
func IsAgentTool(name string) bool {
	switch name {
	case "bash", "read", "write", "edit", "glob", "grep":
		return true
	}
	return false
}
