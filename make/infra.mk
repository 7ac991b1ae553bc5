# Infra targets: Lambda packaging and CDK synth.  Included from the main
# Makefile; also usable alone: `make -f make/infra.mk synth`.
# Needs .venv (with aws-cdk-lib) and node_modules (`npm ci`).

PY ?= .venv/bin/python
LAMBDA_BUILD_DIR ?= build/lambda
# --no-install: use the CLI pinned in package-lock.json, never fetch another.
CDK ?= npx --no-install cdk
CDK_FLAGS ?=
# jsii (aws-cdk-lib) prints a Node 20 end-of-life banner on every run; Node 22+
# does not need this.
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION ?= 20

# W3005 (a DependsOn also implied by a GetAtt) is how CDK writes some
# dependencies; harmless, and not ours to change.
CFN_LINT_FLAGS ?= --ignore-checks=W3005
STACK_TEMPLATE ?= cdk.out/Crawlstack.template.json

.PHONY: build-lambda synth infra-lint infra-test infra-diff infra-deploy infra-clean

## Vendored deps layer (cached on the requirements hash) + code asset
build-lambda:
	$(PY) scripts/build_lambda.py --out $(LAMBDA_BUILD_DIR)

## CloudFormation template in cdk.out/ (no Docker, no AWS account needed); cdk-nag
## runs in the app (report: cdk.out/AwsSolutions-*-NagReport.csv), then cfn-lint
synth: build-lambda
	$(CDK) synth --quiet -c crawlstack:lambda_build_dir=$(LAMBDA_BUILD_DIR) $(CDK_FLAGS)
	$(MAKE) -f make/infra.mk infra-lint PY=$(PY)

## cfn-lint on the synthesized template (`make synth` first)
infra-lint:
	$(dir $(PY))cfn-lint $(CFN_LINT_FLAGS) $(STACK_TEMPLATE)

## CDK template assertion tests (no build needed)
infra-test:
	$(PY) -m pytest tests/infra -q

infra-diff: build-lambda
	$(CDK) diff -c crawlstack:lambda_build_dir=$(LAMBDA_BUILD_DIR) $(CDK_FLAGS)

## Deploy with the current AWS credentials (run `npx cdk bootstrap` once per account/region)
infra-deploy: build-lambda
	$(CDK) deploy -c crawlstack:lambda_build_dir=$(LAMBDA_BUILD_DIR) $(CDK_FLAGS)

infra-clean:
	rm -rf $(LAMBDA_BUILD_DIR) cdk.out
