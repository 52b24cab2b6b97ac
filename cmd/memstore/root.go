package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/memstore/memstore/internal/workercli"
	"github.com/spf13/cobra"
)

// streams are a command's standard input and outputs. They are passed down
// from main (or a test) rather than read from os, so a test can type into a
// command and read what it printed.
type streams struct {
	stdin          io.Reader
	stdout, stderr io.Writer
}

// newRootCommand builds the whole command table: every noun and verb of the
// binary is added here, and only here.
func newRootCommand(s streams) *cobra.Command {
	root := &cobra.Command{
		Use:   "memstore",
		Short: "memory stores for agent sandboxes (server and worker in one binary)",
		Long: `memstore: memory stores for agent sandboxes (server and worker in one binary).

The operator verbs find a local server and its admin key on their own
(--base-url, MEMSTORE_BASE_URL; --api-key, MEMSTORE_API_KEY, <data>/admin.key).`,
		Example: `  memstore demo                      # see it work, in a temporary folder
  memstore up                        # a server and a worker, ready for sessions
  memstore store create notes -q     # print only the new store's id`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError{Err: fmt.Errorf("unknown command %q", args[0])}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprint(s.stderr, cmd.UsageString())
			return errUsage
		},
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetIn(s.stdin)
	root.SetOut(s.stdout) // completion scripts and the completions themselves
	root.SetErr(s.stderr)
	root.SetUsageTemplate(usageTemplate)
	// Help is about the command, not its data: it goes to stderr, leaving
	// stdout to what scripts read.
	root.SetHelpFunc(func(cmd *cobra.Command, _ []string) {
		if cmd.Long != "" {
			fmt.Fprintf(s.stderr, "%s\n\n", cmd.Long)
		} else if cmd.Short != "" {
			fmt.Fprintf(s.stderr, "%s\n\n", cmd.Short)
		}
		fmt.Fprint(s.stderr, cmd.UsageString())
	})
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{Err: err} })
	root.CompletionOptions.HiddenDefaultCmd = false
	root.AddCommand(
		newServeCommand(s),
		newUpCommand(s),
		newDemoCommand(s),
		newMigrateCommand(s),
		workercli.NewCommand(s.stderr),
		newDoctorCommand(s),
		newEnvCommand(s),
		newAgentCommand(s),
		newSkillCommand(s),
		newStoreCommand(s),
		newMemoryCommand(s),
		newSessionCommand(s),
		newChatCommand(s),
		newUserCommand(s),
		newWebhookCommand(s),
		newMCPCommand(s),
		newBenchCommand(s),
		newBackupCommand(s),
		newRestoreCommand(s),
		newVersionCommand(s),
	)
	return root
}

// usageTemplate is cobra's, with the usage line first and on one line
// ("Usage: memstore store create [flags] <name>"), so an error message and
// the line that says how to call the command read together.
const usageTemplate = `Usage: {{if .HasAvailableSubCommands}}{{.CommandPath}} <command> [flags]{{else}}{{.UseLine}}{{end}}{{if gt (len .Aliases) 0}}

Aliases:
  {{.NameAndAliases}}{{end}}{{if .HasExample}}

Examples:
{{.Example}}{{end}}{{if .HasAvailableSubCommands}}

Commands:{{range .Commands}}{{if (or .IsAvailableCommand (eq .Name "help"))}}
  {{rpad .Name .NamePadding }} {{.Short}}{{end}}{{end}}{{end}}{{if .HasAvailableLocalFlags}}

Flags:
{{.LocalFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}{{if .HasAvailableInheritedFlags}}

Global Flags:
{{.InheritedFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}{{if .HasAvailableSubCommands}}

Run '{{.CommandPath}} <command> --help' for a command's flags and examples.{{end}}
`

// argCount accepts between min and max positional arguments (max -1: no
// upper bound).
func argCount(min, max int) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) < min || (max >= 0 && len(args) > max) {
			return usageError{Err: errors.New("wrong number of arguments")}
		}
		return nil
	}
}

// The command-line plumbing the worker's commands share with the rest
// lives in internal/workercli, which the worker-only binary builds from.
type usageError = workercli.UsageError

var (
	errUsage = workercli.ErrUsage
	noArgs   = workercli.NoArgs
	newNoun  = workercli.NewNoun
	envOr    = workercli.EnvOr
)
