//go:build tools

// Package tools pins protoc-gen-go (the generator of vkproviderv1) in go.mod.
package tools

import _ "google.golang.org/protobuf/cmd/protoc-gen-go"
