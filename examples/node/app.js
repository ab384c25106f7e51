'use strict';
// A small RAG question-answering service in Node.js, instrumented with the OpenTelemetry JS
// SDK and OpenInference attributes, and nothing from ragpulse. It exports OTLP to whatever
// OTEL_EXPORTER_OTLP_ENDPOINT names; point that at `ragpulse serve` and the answer span of
// each request comes back with ragpulse.eval.* scores.
//
//   OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 node app.js
//   curl -s localhost:3000/ask -d '{"question": "How tall is the Eiffel Tower?"}'
//
// The "model" is extractive and offline: it answers with the retrieved sentence that shares
// the most words with the question. {"drift": true} makes it change a number, the kind of
// unfaithful answer ragpulse is there to catch.

const http = require('node:http');
const { trace, SpanKind, SpanStatusCode } = require('@opentelemetry/api');
const { NodeTracerProvider } = require('@opentelemetry/sdk-trace-node');
const { BatchSpanProcessor } = require('@opentelemetry/sdk-trace-base');
const { OTLPTraceExporter } = require('@opentelemetry/exporter-trace-otlp-proto');
const { defaultResource, resourceFromAttributes } = require('@opentelemetry/resources');
const {
  SemanticConventions: SC,
  OpenInferenceSpanKind,
} = require('@arizeai/openinference-semantic-conventions');

const provider = new NodeTracerProvider({
  resource: defaultResource().merge(
    resourceFromAttributes({ 'service.name': process.env.OTEL_SERVICE_NAME || 'node-rag' }),
  ),
  // The exporter reads OTEL_EXPORTER_OTLP_ENDPOINT (and _HEADERS) itself.
  spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())],
});
provider.register();
const tracer = trace.getTracer('ragpulse-node-example', '0.1.0');

const DOCUMENTS = [
  {
    id: 'eiffel',
    text: 'The Eiffel Tower is 330 metres tall. It was completed in 1889 for the World Fair in Paris.',
  },
  {
    id: 'louvre',
    text: 'The Louvre is the most visited museum in the world. It holds about 35,000 works of art.',
  },
  {
    id: 'seine',
    text: 'The Seine is 777 kilometres long. It flows through Paris into the English Channel.',
  },
];

const words = (text) => new Set(text.toLowerCase().match(/[a-z0-9,]+/g) || []);

function overlap(a, b) {
  let shared = 0;
  for (const word of a) if (b.has(word)) shared += 1;
  return shared;
}

function retrieve(question) {
  return tracer.startActiveSpan('retrieve', (span) => {
    const asked = words(question);
    const ranked = DOCUMENTS.map((doc) => ({ ...doc, score: overlap(asked, words(doc.text)) }))
      .sort((a, b) => b.score - a.score)
      .slice(0, 2);
    span.setAttribute(SC.OPENINFERENCE_SPAN_KIND, OpenInferenceSpanKind.RETRIEVER);
    span.setAttribute(SC.INPUT_VALUE, question);
    ranked.forEach((doc, i) => {
      const prefix = `${SC.RETRIEVAL_DOCUMENTS}.${i}`;
      span.setAttribute(`${prefix}.${SC.DOCUMENT_ID}`, doc.id);
      span.setAttribute(`${prefix}.${SC.DOCUMENT_CONTENT}`, doc.text);
      span.setAttribute(`${prefix}.${SC.DOCUMENT_SCORE}`, doc.score);
    });
    span.end();
    return ranked;
  });
}

function generate(question, documents, drift) {
  return tracer.startActiveSpan('generate', { kind: SpanKind.CLIENT }, (span) => {
    const asked = words(question);
    const sentences = documents.flatMap((doc) => doc.text.split(/(?<=\.)\s+/));
    let answer = sentences.reduce((best, sentence) =>
      overlap(asked, words(sentence)) > overlap(asked, words(best)) ? sentence : best,
    );
    if (drift) answer = answer.replace(/\d+/, (n) => String(Number(n) * 2));
    span.setAttribute(SC.OPENINFERENCE_SPAN_KIND, OpenInferenceSpanKind.LLM);
    span.setAttribute(SC.LLM_MODEL_NAME, 'extractive-v1');
    span.setAttribute(`${SC.LLM_INPUT_MESSAGES}.0.${SC.MESSAGE_ROLE}`, 'user');
    span.setAttribute(`${SC.LLM_INPUT_MESSAGES}.0.${SC.MESSAGE_CONTENT}`, question);
    span.setAttribute(`${SC.LLM_OUTPUT_MESSAGES}.0.${SC.MESSAGE_ROLE}`, 'assistant');
    span.setAttribute(`${SC.LLM_OUTPUT_MESSAGES}.0.${SC.MESSAGE_CONTENT}`, answer);
    span.end();
    return answer;
  });
}

// The evaluation unit: the request's root span, with the question in and the answer out.
function answerQuestion(question, drift) {
  return tracer.startActiveSpan('rag.answer', { kind: SpanKind.SERVER }, (span) => {
    try {
      span.setAttribute(SC.OPENINFERENCE_SPAN_KIND, OpenInferenceSpanKind.CHAIN);
      span.setAttribute(SC.INPUT_VALUE, question);
      const answer = generate(question, retrieve(question), drift);
      span.setAttribute(SC.OUTPUT_VALUE, answer);
      const { traceId } = span.spanContext();
      return { answer, traceId };
    } catch (error) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: String(error) });
      throw error;
    } finally {
      span.end();
    }
  });
}

const server = http.createServer((request, response) => {
  if (request.method !== 'POST' || request.url !== '/ask') {
    response.writeHead(404).end();
    return;
  }
  let body = '';
  request.on('data', (chunk) => {
    body += chunk;
  });
  request.on('end', () => {
    try {
      const { question, drift } = JSON.parse(body);
      const result = answerQuestion(String(question), Boolean(drift));
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(JSON.stringify(result));
    } catch (error) {
      response.writeHead(400, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ error: String(error) }));
    }
  });
});

server.listen(Number(process.env.PORT || 3000), '127.0.0.1', () => {
  console.log(`listening on ${server.address().port}`);
});

// Flush the spans still batched before exiting.
process.on('SIGTERM', () => {
  server.close();
  provider.shutdown().finally(() => process.exit(0));
});
