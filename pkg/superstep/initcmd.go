//go:build !superstep.lambda

package superstep

import (
	"fmt"
	"path"
	"path/filepath"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/superstep/superstep/pkg/internal/scaffold"
)

// modulePath is superstep's module path.
const modulePath = "github.com/superstep/superstep"

func newInitCmd(env Env) *cobra.Command {
	var module, replace string
	c := &cobra.Command{
		Use:   "init DIR",
		Short: "Scaffold a project that serves graphs of your own",
		Long: `Write a new project into DIR (created if missing; it must be empty):
go.mod, main.go with a starter graph (a router, a join and an interrupt)
and its test, a Makefile (make run, make dev, make test and the build-*
targets sam build calls), infra/template.yaml (the SAM template of the five
Lambda functions, one binary for all), samconfig.toml, events/*.json for
sam local invoke, and a README.

--module sets the module path (default example.com/<DIR's name>).
--replace points go.mod at a superstep checkout instead of a release.`,
		Example: `  superstep init orders --module github.com/you/orders
  cd orders && go mod tidy && make run`,
		Args: exactArgs("DIR"),
		RunE: func(c *cobra.Command, args []string) error {
			dir := args[0]
			if module == "" {
				module = "example.com/" + path.Base(filepath.ToSlash(filepath.Clean(dir)))
			}
			version := superstepVersion()
			written, err := scaffold.Create(dir, scaffold.Project{Module: module, Version: version, Replace: replace})
			if err != nil {
				return badInput(err)
			}
			fmt.Fprintf(env.Stdout, "Wrote a superstep project (module %s) into %s:\n", module, dir)
			for _, f := range written {
				fmt.Fprintf(env.Stdout, "  %s\n", f)
			}
			if replace == "" && version == "" {
				fmt.Fprintf(env.Stderr, "note: this superstep was built from source, so go.mod requires %s v0.0.0;\n"+
					"      point it at your checkout: go mod edit -replace %s=/path/to/superstep\n", modulePath, modulePath)
			}
			fmt.Fprintf(env.Stdout, "\nNext:\n  cd %s\n  go mod tidy\n  make run    # the starter graph, here\n  make dev    # its HTTP API and A2A agent\n  sam build && sam deploy --guided    # on AWS\n", dir)
			return nil
		},
	}
	c.Flags().StringVar(&module, "module", "", "module `PATH` of the project (default example.com/<DIR's name>)")
	c.Flags().StringVar(&replace, "replace", "", "`DIR` of a superstep checkout that go.mod replaces the module with")
	return c
}

// superstepVersion is the released version of superstep this binary was
// built with, or "" for a build from source.
func superstepVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	if bi.Main.Path == modulePath && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	for _, d := range bi.Deps {
		if d.Path == modulePath && d.Replace == nil {
			return d.Version
		}
	}
	return ""
}
