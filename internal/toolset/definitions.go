package toolset

// Definition describes one tool to a model: its name, what it does, and the
// JSON Schema of the input it accepts. It is the one home of the tool list:
// the worker runs exactly these tools and the server's model runtime offers
// exactly these to the model, with these schemas.
type Definition struct {
	Name        string
	Description string
	// InputSchema is a JSON Schema object: "properties" and "required".
	InputSchema map[string]any
}

// Definitions returns the tools of agent_toolset_20260401 in a stable order.
// The schemas name the fields of the inputs the tools decode (a test holds
// them to it).
func Definitions() []Definition {
	str := func(desc string) map[string]any { return map[string]any{"type": "string", "description": desc} }
	boolean := func(desc string) map[string]any { return map[string]any{"type": "boolean", "description": desc} }
	schema := func(props map[string]any, required ...string) map[string]any {
		if required == nil {
			required = []string{}
		}
		return map[string]any{"type": "object", "properties": props, "required": required}
	}
	return []Definition{
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
