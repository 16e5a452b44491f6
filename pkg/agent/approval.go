package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// resolveSchema compiles a tool's input schema for validation; nil for a
// tool that declares none.
func resolveSchema(raw json.RawMessage) (*jsonschema.Resolved, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("not a JSON schema: %w", err)
	}
	r, err := s.Resolve(nil)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// checkArguments checks the arguments of an edited call of tool against
// its input schema, and says what does not fit: the approver then
// answers again, the run waiting meanwhile.
func checkArguments(schema *jsonschema.Resolved, tool string, input json.RawMessage) error {
	if schema == nil {
		return nil
	}
	var v any
	if err := json.Unmarshal(input, &v); err != nil {
		return fmt.Errorf(`the edited "input" is not a JSON object of tool %s's arguments`, tool)
	}
	if err := schema.Validate(v); err != nil {
		return fmt.Errorf(`the edited "input" does not fit tool %s's input schema: %s; send {"decision": "edit", "input": {...}} with arguments that fit`, tool, schemaWords(err))
	}
	return nil
}

// schemaLocation matches the locations in a validation error of
// jsonschema-go ("validating /properties/cents: ").
var schemaLocation = regexp.MustCompile(`validating (/[^:]*): `)

// schemaWords is a schema validation error with its locations as the
// approver knows them: `field "cents": type: all has type "string", want
// "integer"` rather than `validating root: validating /properties/cents:
// …`.
func schemaWords(err error) string {
	msg := strings.ReplaceAll(err.Error(), "validating root: ", "")
	return schemaLocation.ReplaceAllStringFunc(msg, func(m string) string {
		loc := schemaLocation.FindStringSubmatch(m)[1]
		var path []string
		parts := strings.Split(strings.TrimPrefix(loc, "/"), "/")
		for i := 0; i < len(parts); i++ {
			switch parts[i] {
			case "properties":
				if i+1 < len(parts) {
					path = append(path, parts[i+1])
					i++
				}
			case "items", "prefixItems":
				path = append(path, "[]")
			}
		}
		if len(path) == 0 {
			return ""
		}
		return fmt.Sprintf("field %q: ", strings.ReplaceAll(strings.Join(path, "."), ".[]", "[]"))
	})
}
