{{/* Chart name, overridable. */}}
{{- define "eventbuilder-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Fully qualified app name; it prefixes every object of the release. */}}
{{- define "eventbuilder-operator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "eventbuilder-operator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "eventbuilder-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "eventbuilder-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "eventbuilder-operator.labels" -}}
helm.sh/chart: {{ include "eventbuilder-operator.chart" . }}
{{ include "eventbuilder-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: eventbuilder
{{- end }}

{{/* A label map as the manager's flags take it: k=v,... in key order. */}}
{{- define "eventbuilder-operator.labelList" -}}
{{- $pairs := list }}
{{- range $k, $v := . }}
{{- $pairs = append $pairs (printf "%s=%s" $k $v) }}
{{- end }}
{{- join "," $pairs }}
{{- end }}

{{/* Fails unless each entry of a numaNodes list (.list, at .field) names another NUMA node. */}}
{{- define "eventbuilder-operator.uniqueNuma" -}}
{{- $seen := dict }}
{{- range $i, $n := .list }}
{{- if hasKey $seen (toString $n.numa) }}
{{- fail (printf "%s[%d].numa: NUMA node %v is listed twice; give each NUMA node one entry" $.field $i $n.numa) }}
{{- end }}
{{- $_ := set $seen (toString $n.numa) true }}
{{- end }}
{{- end }}
