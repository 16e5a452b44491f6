package infra

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// templateFile is the SAM template, relative to this package.
const templateFile = "template.yaml"

// template is a parsed CloudFormation template: plain maps, slices and
// scalars, with the short-form intrinsic functions (!Ref, !GetAtt, !Sub,
// ...) turned into their long form ({"Ref": ...}, {"Fn::GetAtt": [...]}),
// as CloudFormation reads them.
type template map[string]any

// loadTemplate parses template.yaml.
func loadTemplate(t *testing.T) template {
	t.Helper()
	data, err := os.ReadFile(templateFile)
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("%s: %v", templateFile, err)
	}
	v, err := cfnValue(&doc)
	if err != nil {
		t.Fatalf("%s: %v", templateFile, err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%s: top level is %T, want a mapping", templateFile, v)
	}
	return template(m)
}

// cfnValue converts a YAML node to plain Go values, expanding
// CloudFormation's short-form tags.
func cfnValue(n *yaml.Node) (any, error) {
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) != 1 {
			return nil, fmt.Errorf("line %d: want one document", n.Line)
		}
		return cfnValue(n.Content[0])
	case yaml.AliasNode:
		return cfnValue(n.Alias)
	}
	if fn, ok := intrinsic(n.Tag); ok {
		var arg any
		switch {
		case n.Kind == yaml.ScalarNode && fn == "Fn::GetAtt":
			// !GetAtt Resource.Attribute -> [Resource, Attribute]
			res, attr, found := strings.Cut(n.Value, ".")
			if !found {
				return nil, fmt.Errorf("line %d: !GetAtt %q is not Resource.Attribute", n.Line, n.Value)
			}
			arg = []any{res, attr}
		case n.Kind == yaml.ScalarNode:
			arg = n.Value
		default:
			plain := *n
			plain.Tag = ""
			v, err := cfnValue(&plain)
			if err != nil {
				return nil, err
			}
			arg = v
		}
		return map[string]any{fn: arg}, nil
	}
	switch n.Kind {
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			if _, dup := m[k]; dup {
				return nil, fmt.Errorf("line %d: key %q repeated", n.Content[i].Line, k)
			}
			v, err := cfnValue(n.Content[i+1])
			if err != nil {
				return nil, err
			}
			m[k] = v
		}
		return m, nil
	case yaml.SequenceNode:
		s := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := cfnValue(c)
			if err != nil {
				return nil, err
			}
			s = append(s, v)
		}
		return s, nil
	case yaml.ScalarNode:
		var v any
		if err := n.Decode(&v); err != nil {
			return nil, fmt.Errorf("line %d: %w", n.Line, err)
		}
		return v, nil
	}
	return nil, fmt.Errorf("line %d: unexpected YAML node kind %v", n.Line, n.Kind)
}

// intrinsic maps a short-form tag (!Ref, !Sub, ...) to the key of the
// function's long form.
func intrinsic(tag string) (string, bool) {
	name, ok := strings.CutPrefix(tag, "!")
	if !ok || name == "" || strings.HasPrefix(name, "!") {
		return "", false // untagged, or a YAML core tag (!!str, ...)
	}
	if name == "Ref" || name == "Condition" {
		return name, true
	}
	return "Fn::" + name, true
}

// resource is one entry of Resources.
type resource struct {
	ID         string
	Type       string
	Properties map[string]any
	Metadata   map[string]any
}

// resources returns the template's resources of type typ, sorted by id.
func (tp template) resources(typ string) []resource {
	var out []resource
	for id, v := range asMap(tp["Resources"]) {
		r := asMap(v)
		if r["Type"] == typ {
			out = append(out, resource{ID: id, Type: typ, Properties: asMap(r["Properties"]), Metadata: asMap(r["Metadata"])})
		}
	}
	slices.SortFunc(out, func(a, b resource) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// resource returns the resource id, failing t if it is missing or not of
// type typ.
func (tp template) resource(t *testing.T, id, typ string) resource {
	t.Helper()
	r := asMap(asMap(tp["Resources"])[id])
	if r == nil {
		t.Fatalf("resource %s is missing", id)
	}
	if r["Type"] != typ {
		t.Fatalf("resource %s is a %v, want %s", id, r["Type"], typ)
	}
	return resource{ID: id, Type: typ, Properties: asMap(r["Properties"]), Metadata: asMap(r["Metadata"])}
}

// functionProp returns property key of a serverless function, falling
// back to Globals.Function as SAM does.
func (tp template) functionProp(fn resource, key string) any {
	if v, ok := fn.Properties[key]; ok {
		return v
	}
	return asMap(asMap(tp["Globals"])["Function"])[key]
}

// asMap returns v as a mapping, or nil.
func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// asList returns v as a list; a single value is a list of one.
func asList(v any) []any {
	switch v := v.(type) {
	case nil:
		return nil
	case []any:
		return v
	default:
		return []any{v}
	}
}

// asInt returns v as an integer (CloudFormation accepts "30" as 30).
func asInt(v any) (int, bool) {
	switch v := v.(type) {
	case int:
		return v, true
	case string:
		n, err := strconv.Atoi(v)
		return n, err == nil
	}
	return 0, false
}

// asBool returns v as a boolean (CloudFormation accepts "true").
func asBool(v any) (bool, bool) {
	switch v := v.(type) {
	case bool:
		return v, true
	case string:
		b, err := strconv.ParseBool(v)
		return b, err == nil
	}
	return false, false
}

// refTarget returns the logical id that v refers to with Ref or GetAtt
// (and the attribute, for GetAtt).
func refTarget(v any) (id, attr string, ok bool) {
	m := asMap(v)
	if len(m) != 1 {
		return "", "", false
	}
	if r, isRef := m["Ref"].(string); isRef {
		return r, "", true
	}
	if ga := asList(m["Fn::GetAtt"]); len(ga) == 2 {
		id, _ := ga[0].(string)
		attr, _ := ga[1].(string)
		return id, attr, id != "" && attr != ""
	}
	return "", "", false
}

func TestCFNValueShortForms(t *testing.T) {
	src := `
a: !Ref X
b: !GetAtt Q.Arn
c: !Sub "${T.Arn}/index/x"
d: !If [C, [1], !Ref AWS::NoValue]
e: !GetAtt [Q, QueueName]
f: 30
g: "30"
h: !Not [!Equals [!Ref P, ""]]
`
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatal(err)
	}
	v, err := cfnValue(&doc)
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(v)
	want := fmt.Sprint(map[string]any{
		"a": map[string]any{"Ref": "X"},
		"b": map[string]any{"Fn::GetAtt": []any{"Q", "Arn"}},
		"c": map[string]any{"Fn::Sub": "${T.Arn}/index/x"},
		"d": map[string]any{"Fn::If": []any{"C", []any{1}, map[string]any{"Ref": "AWS::NoValue"}}},
		"e": map[string]any{"Fn::GetAtt": []any{"Q", "QueueName"}},
		"f": 30,
		"g": "30",
		"h": map[string]any{"Fn::Not": []any{map[string]any{"Fn::Equals": []any{map[string]any{"Ref": "P"}, ""}}}},
	})
	if got != want {
		t.Errorf("cfnValue:\n got %s\nwant %s", got, want)
	}
}
