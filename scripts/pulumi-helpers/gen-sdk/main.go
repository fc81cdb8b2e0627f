// gen-sdk: generate a Pulumi SDK for one language from a package schema, with Pulumi's own code
// generators (github.com/pulumi/pulumi/pkg/v3/codegen/{nodejs,python,go}).
//
//	gen-sdk --schema schema/pulumi/schema.json --language nodejs --out DIR
//
// DIR is emptied first, then receives the generated sources (for nodejs: package.json, tsconfig.json,
// index.ts, ...). The schema must be self-contained: references to other packages' schemas are refused,
// since loading them would need their provider plugins.
//
// Built by scripts/install-pulumi-languages.sh in a throwaway module against the same pkg/v3 release as
// the Pulumi CLI; that script also runs it at setup time for the TypeScript SDK.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/blang/semver"
	gogen "github.com/pulumi/pulumi/pkg/v3/codegen/go"
	"github.com/pulumi/pulumi/pkg/v3/codegen/nodejs"
	"github.com/pulumi/pulumi/pkg/v3/codegen/python"
	"github.com/pulumi/pulumi/pkg/v3/codegen/schema"
)

const tool = "netpeer-gen-sdk"

// selfContained is a schema loader that refuses every external package.
type selfContained struct{}

func (selfContained) refuse(name string) error {
	return fmt.Errorf("the schema refers to package %q: only self-contained schemas are supported", name)
}

func (l selfContained) LoadPackage(pkg string, _ *semver.Version) (*schema.Package, error) {
	return nil, l.refuse(pkg)
}

func (l selfContained) LoadPackageV2(_ context.Context, d *schema.PackageDescriptor) (*schema.Package, error) {
	return nil, l.refuse(d.Name)
}

func (l selfContained) LoadPackageReference(pkg string, _ *semver.Version) (schema.PackageReference, error) {
	return nil, l.refuse(pkg)
}

func (l selfContained) LoadPackageReferenceV2(
	_ context.Context, d *schema.PackageDescriptor,
) (schema.PackageReference, error) {
	return nil, l.refuse(d.Name)
}

func main() {
	schemaPath := flag.String("schema", "", "package schema (JSON)")
	language := flag.String("language", "nodejs", "nodejs, python or go")
	out := flag.String("out", "", "output directory (emptied first)")
	version := flag.String("version", "", "override the schema's version")
	flag.Parse()
	if *schemaPath == "" || *out == "" || flag.NArg() != 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*schemaPath, *language, *out, *version); err != nil {
		fmt.Fprintf(os.Stderr, "gen-sdk: %v\n", err)
		os.Exit(1)
	}
}

func run(schemaPath, language, out, version string) error {
	data, err := os.ReadFile(schemaPath)
	if err != nil {
		return err
	}
	var spec schema.PackageSpec
	if err := json.Unmarshal(data, &spec); err != nil {
		return fmt.Errorf("parsing %s: %w", schemaPath, err)
	}
	if version != "" {
		spec.Version = version
	}
	loader := selfContained{}
	pkg, diags, err := schema.BindSpec(spec, loader, schema.ValidationOptions{})
	if err != nil {
		return fmt.Errorf("binding %s: %w", schemaPath, err)
	}
	for _, d := range diags {
		fmt.Fprintf(os.Stderr, "gen-sdk: %s: %v\n", schemaPath, d)
	}
	if diags.HasErrors() {
		return errors.New("the schema has errors")
	}

	var files map[string][]byte
	switch language {
	case "nodejs":
		files, err = nodejs.GeneratePackage(tool, pkg, nil, nil, false, loader)
	case "python":
		files, err = python.GeneratePackage(tool, pkg, nil, loader)
	case "go":
		files, err = gogen.GeneratePackage(tool, pkg, nil)
	default:
		return fmt.Errorf("unsupported language %q (want nodejs, python or go)", language)
	}
	if err != nil {
		return fmt.Errorf("generating the %s SDK: %w", language, err)
	}

	if err := os.RemoveAll(out); err != nil {
		return err
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		path := filepath.Join(out, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, files[name], 0o644); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "gen-sdk: %d files for %s in %s\n", len(names), language, out)
	return nil
}
