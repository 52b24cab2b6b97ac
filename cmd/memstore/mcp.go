package main

import (
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/memstore/memstore/internal/mcpproxy"
)

func newMCPCommand(s streams) *cobra.Command {
	var conn connFlags
	var store string
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "serve the server's memory tools over stdio for a desktop MCP client (Claude Desktop)",
		Long: `memstore mcp speaks the Model Context Protocol on stdin and stdout, for clients that start
a local command, and forwards every tool call to the server's /mcp with the API key: the tools,
their checks and their writes are the server's. --store pins every tool to one store (id or name).
Logs go to stderr. See docs/mcp.md.`,
		Example: `  MEMSTORE_BASE_URL=http://127.0.0.1:8080 MEMSTORE_API_KEY=$KEY memstore mcp
  memstore mcp --store "team notes"`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			key, _, err := conn.key()
			if err != nil {
				return err
			}
			version := "(devel)"
			if info, ok := debug.ReadBuildInfo(); ok {
				version = info.Main.Version
			}
			log := slog.New(slog.NewTextHandler(s.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
			err = mcpproxy.Run(cmd.Context(), mcpproxy.Config{BaseURL: conn.baseURL, APIKey: key, Store: store, Version: version, Logger: log},
				&mcp.IOTransport{Reader: io.NopCloser(s.stdin), Writer: nopWriteCloser{s.stdout}})
			if err != nil && cmd.Context().Err() == nil {
				return fmt.Errorf("memstore mcp: %w", err)
			}
			return nil
		},
	}
	conn.register(cmd.Flags())
	cmd.Flags().StringVar(&store, "store", "", "pin every tool to this memory store (id or name)")
	return cmd
}

// nopWriteCloser leaves stdout open when the MCP session ends.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
