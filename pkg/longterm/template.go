package longterm

import (
	"fmt"
	"strings"
)

// Template is a namespace with placeholders, its components joined by
// '/': "users/{user_id}/memories". Expand fills them.
type Template string

// Placeholders returns the names of the template's placeholders, and an
// error if the template is malformed (a placeholder must be a whole
// component).
func (t Template) Placeholders() ([]string, error) {
	var names []string
	for _, c := range strings.Split(strings.Trim(string(t), "/"), "/") {
		inner, ok := strings.CutPrefix(c, "{")
		if !ok {
			if strings.ContainsAny(c, "{}") {
				return nil, fmt.Errorf("%w: namespace template %q: a placeholder must be a whole component, as in users/{user_id}", ErrInvalid, t)
			}
			continue
		}
		name, ok := strings.CutSuffix(inner, "}")
		if !ok || name == "" || strings.ContainsAny(name, "{}") {
			return nil, fmt.Errorf("%w: namespace template %q: a placeholder must be a whole component, as in users/{user_id}", ErrInvalid, t)
		}
		names = append(names, name)
	}
	return names, nil
}

// Expand fills the template's placeholders with vars and checks the
// namespace it makes.
func (t Template) Expand(vars map[string]string) (Namespace, error) {
	if _, err := t.Placeholders(); err != nil {
		return nil, err
	}
	if strings.Trim(string(t), "/") == "" {
		return nil, fmt.Errorf("%w: the namespace template is empty", ErrInvalid)
	}
	var ns Namespace
	for _, c := range strings.Split(strings.Trim(string(t), "/"), "/") {
		if name, ok := strings.CutPrefix(c, "{"); ok {
			name = strings.TrimSuffix(name, "}")
			v, ok := vars[name]
			if !ok || v == "" {
				return nil, fmt.Errorf("%w: namespace template %q needs %s: run on a thread whose metadata has %q (as in {\"%s\": \"...\"})", ErrInvalid, t, name, name, name)
			}
			c = v
		}
		ns = append(ns, c)
	}
	return ns, ns.Check()
}
