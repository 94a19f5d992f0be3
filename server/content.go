package server

import (
	"fmt"
	"reflect"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tenantmcp/tenantmcp/redact"
)

// Content is a result made of content blocks. A tool whose Out is Content
// answers with its blocks in place of structured content (and declares no
// output schema); a prompt whose Data is Content sends each block as a
// user message, after the text if that is not empty.
//
// Every string of every block (texts, URIs, names, MIME types) passes the
// caller's redactor, as a JSON result's strings do: nothing textual
// reaches the client unredacted. Binary data (ImageBlock, AudioBlock, a
// ResourceBlock's Blob) is the handler's own bytes and is sent as is,
// never scanned: do not put a row's text into it. The result is labelled
// for flow like any other (the tool's label, plus the categories the
// redactor found in the texts).
type Content []Block

// Block is one block of Content: a TextBlock, ImageBlock, AudioBlock,
// ResourceBlock or LinkBlock.
type Block interface {
	// wire is the block as the go-sdk sends it, its strings redacted by red.
	wire(red *redact.Scoped) (mcp.Content, error)
}

// TextBlock is a text content block.
type TextBlock struct{ Text string }

// ImageBlock is an image content block: Data (raw bytes; the wire carries
// them in base64) of type MIMEType, such as "image/png".
type ImageBlock struct {
	MIMEType string
	Data     []byte
}

// AudioBlock is an audio content block, such as "audio/wav" Data.
type AudioBlock struct {
	MIMEType string
	Data     []byte
}

// ResourceBlock embeds a resource's contents: Text, or Blob (binary, not
// scanned) when Blob is not nil; never both.
type ResourceBlock struct {
	URI      string
	MIMEType string
	Text     string
	Blob     []byte
}

// LinkBlock links to a resource the client may read (resources/read).
type LinkBlock struct {
	URI         string
	Name        string
	Title       string
	Description string
	MIMEType    string
}

// Blob is a binary resource: a resource handler whose Out is Blob answers
// with Data (base64 on the wire) of type MIMEType (default
// "application/octet-stream") in place of JSON. Data is sent as is, never
// scanned; MIMEType passes the redactor.
type Blob struct {
	MIMEType string
	Data     []byte
}

func (b TextBlock) wire(red *redact.Scoped) (mcp.Content, error) {
	return &mcp.TextContent{Text: red.String(b.Text)}, nil
}

func (b ImageBlock) wire(red *redact.Scoped) (mcp.Content, error) {
	return &mcp.ImageContent{MIMEType: red.String(b.MIMEType), Data: b.Data}, nil
}

func (b AudioBlock) wire(red *redact.Scoped) (mcp.Content, error) {
	return &mcp.AudioContent{MIMEType: red.String(b.MIMEType), Data: b.Data}, nil
}

func (b ResourceBlock) wire(red *redact.Scoped) (mcp.Content, error) {
	if b.Blob != nil && b.Text != "" {
		return nil, fmt.Errorf("embedded resource %q has both Text and Blob", red.String(b.URI))
	}
	return &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: red.String(b.URI),
		MIMEType: red.String(b.MIMEType), Text: red.String(b.Text), Blob: b.Blob}}, nil
}

func (b LinkBlock) wire(red *redact.Scoped) (mcp.Content, error) {
	return &mcp.ResourceLink{URI: red.String(b.URI), Name: red.String(b.Name), Title: red.String(b.Title),
		Description: red.String(b.Description), MIMEType: red.String(b.MIMEType)}, nil
}

// wire converts c for the go-sdk, every string through red. On an error
// nothing is returned.
func (c Content) wire(red *redact.Scoped) ([]mcp.Content, error) {
	out := make([]mcp.Content, 0, len(c))
	for i, b := range c {
		if b == nil || (reflect.ValueOf(b).Kind() == reflect.Pointer && reflect.ValueOf(b).IsNil()) {
			return nil, fmt.Errorf("content block %d is nil", i)
		}
		w, err := b.wire(red)
		if err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, nil
}

// contents is a resource read's contents: a Blob as itself, anything else
// as its redacted JSON.
func contents(red *redact.Scoped, uri string, out any) ([]*mcp.ResourceContents, error) {
	if b, ok := out.(Blob); ok {
		mt := red.String(b.MIMEType)
		if mt == "" {
			mt = "application/octet-stream"
		}
		data := b.Data
		if data == nil {
			data = []byte{} // an empty blob, not a missing one
		}
		return []*mcp.ResourceContents{{URI: uri, MIMEType: mt, Blob: data}}, nil
	}
	js, err := red.JSON(out)
	if err != nil {
		return nil, err
	}
	return []*mcp.ResourceContents{{URI: uri, MIMEType: MIMEJSON, Text: string(js)}}, nil
}

// resourceMIME is the MIME type a resource of Go type out lists: none for
// a Blob (each read names its own).
func resourceMIME(out reflect.Type) string {
	if out == reflect.TypeFor[Blob]() {
		return ""
	}
	return MIMEJSON
}
