package mcpfixture

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"image"
	"image/color"
	"image/png"

	"github.com/tenantmcp/tenantmcp/guardedsql"
	"github.com/tenantmcp/tenantmcp/server"
)

// The fixtures with images, audio and embedded resources return
// server.Content (tools, prompts) and server.Blob (resources).

// PNG is a 1×1 red pixel; WAV is a tenth of a second of 8 kHz silence.
var PNG, WAV = redPixel(), silence()

func redPixel() []byte {
	img := image.NewRGBA(image.Rect(0, 0, 1, 1))
	img.Set(0, 0, color.RGBA{R: 255, A: 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		panic(err)
	}
	return b.Bytes()
}

func silence() []byte {
	const rate, samples = 8000, 800 // 8-bit mono PCM
	var b bytes.Buffer
	le := func(v any) { _ = binary.Write(&b, binary.LittleEndian, v) }
	b.WriteString("RIFF")
	le(uint32(36 + samples))
	b.WriteString("WAVEfmt ")
	le(uint32(16))
	le(uint16(1)) // PCM
	le(uint16(1)) // mono
	le(uint32(rate))
	le(uint32(rate)) // bytes per second
	le(uint16(1))    // block align
	le(uint16(8))    // bits per sample
	b.WriteString("data")
	le(uint32(samples))
	b.Write(bytes.Repeat([]byte{0x80}, samples))
	return b.Bytes()
}

func content(blocks ...server.Block) func(context.Context, *guardedsql.DB, none) (server.Content, error) {
	return func(context.Context, *guardedsql.DB, none) (server.Content, error) { return blocks, nil }
}

func registerContent(s *server.Server) error {
	return errors.Join(
		server.AddTool(s, server.Tool{Name: "test_image_content", Description: "Returns an image."},
			content(server.ImageBlock{MIMEType: "image/png", Data: PNG})),
		server.AddTool(s, server.Tool{Name: "test_audio_content", Description: "Returns audio."},
			content(server.AudioBlock{MIMEType: "audio/wav", Data: WAV})),
		server.AddTool(s, server.Tool{Name: "test_embedded_resource", Description: "Returns an embedded resource."},
			content(server.ResourceBlock{URI: "test://embedded-resource", MIMEType: "text/plain", Text: "This is an embedded resource content."})),
		server.AddTool(s, server.Tool{Name: "test_multiple_content_types", Description: "Returns text, an image and a resource."},
			content(server.TextBlock{Text: "Multiple content types test:"},
				server.ImageBlock{MIMEType: "image/png", Data: PNG},
				server.ResourceBlock{URI: "test://mixed-content-resource", MIMEType: "application/json", Text: `{"test":"data","value":123}`})),
		server.AddResource(s, server.Resource{URI: "test://static-binary", Name: "static-binary", Description: "A binary resource (a PNG)."},
			func(context.Context, *guardedsql.DB, map[string]string) (server.Blob, error) {
				return server.Blob{MIMEType: "image/png", Data: PNG}, nil
			}),
		server.AddPrompt(s, server.Prompt{Name: "test_prompt_with_embedded_resource", Description: "A prompt that embeds a resource.",
			Args: []server.PromptArg{{Name: "resourceUri", Description: "URI of the resource to embed", Required: true}}},
			func(_ context.Context, _ *guardedsql.DB, args map[string]string) (string, server.Content, error) {
				return "", server.Content{
					server.ResourceBlock{URI: args["resourceUri"], MIMEType: "text/plain", Text: "Embedded resource content for testing."},
					server.TextBlock{Text: "Please process the embedded resource above."},
				}, nil
			}),
		server.AddPrompt(s, server.Prompt{Name: "test_prompt_with_image", Description: "A prompt with an image."},
			func(context.Context, *guardedsql.DB, map[string]string) (string, server.Content, error) {
				return "", server.Content{
					server.ImageBlock{MIMEType: "image/png", Data: PNG},
					server.TextBlock{Text: "Please analyze the image above."},
				}, nil
			}),
	)
}
