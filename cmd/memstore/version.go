package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

func newVersionCommand(s streams) *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "print memstore's version, commit and Go version (from the build)",
		Example: "  memstore version",
		Args:    noArgs,
		RunE: func(*cobra.Command, []string) error {
			info, ok := debug.ReadBuildInfo()
			if !ok {
				return fmt.Errorf("this binary carries no build information; build it with `go build` or `go install`")
			}
			_, err := fmt.Fprintln(s.stdout, versionLine(info))
			return err
		},
	}
}

// versionLine says which build this is: the module version (a tag for
// `go install …@v1.2.3`, "(devel)" for a build in a clone), the commit it
// was built from (marked "+changes" when the tree had uncommitted
// changes) and the Go version.
func versionLine(info *debug.BuildInfo) string {
	commit, modified, at := "unknown", false, ""
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			commit = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		case "vcs.time":
			at = ", " + s.Value
		}
	}
	if modified {
		commit += "+changes"
	}
	return fmt.Sprintf("memstore %s (commit %s%s) %s", info.Main.Version, commit, at, info.GoVersion)
}
