package runs

import (
	"errors"
	"strings"
)

// storePrefixes are the words the stores start their errors with. They
// tell an operator which store failed; a caller has no use for them.
var storePrefixes = []string{"sqlite: ", "dynamo: ", "dynamodb: ", "memory: "}

// Public is err as callers should see it: without the layers a store
// adds to say which store and which operation failed ("sqlite: list
// threads: page token … is not one this store issued" becomes "page
// token … is not one this store issued"). It is err itself when no store
// named itself. The full error belongs in the log.
func Public(err error) error {
	for e := err; e != nil; {
		msg := e.Error()
		if !hasStorePrefix(msg) {
			return e
		}
		inner := errors.Unwrap(e)
		if inner == nil {
			return errors.New(stripStorePrefix(msg))
		}
		e = inner
	}
	return err
}

func hasStorePrefix(msg string) bool {
	for _, p := range storePrefixes {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// stripStorePrefix drops "store: operation: " from the front of msg, for
// errors whose chain cannot be unwrapped.
func stripStorePrefix(msg string) string {
	for hasStorePrefix(msg) {
		_, rest, _ := strings.Cut(msg, ": ") // the store
		_, after, ok := strings.Cut(rest, ": ")
		if !ok {
			return rest
		}
		msg = after
	}
	return msg
}
