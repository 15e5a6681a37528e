// Note [Stored matrix text]: a program's env values the storage rule refuses never reach the
// stored matrix text, however the YAML spells them; the rest of the matrix reads the same.
#include <gtest/gtest.h>

#include <string>

#include "matrix/matrix.h"
#include "matrix/stored_text.h"
#include "results/cells.h"
#include "results/provenance.h"

namespace scalebench {
namespace {

std::string stored(const std::string& text) {
  return stored_matrix_text(text, "yaml", program_env_value_stored, results::kNotStoredValue);
}

const std::string kHead =
    "name: p  # a comment\n"
    "defaults: {device: cpu, warmup: 1, iterations: 2}\n"
    "sweep: {modes: [train], batch_sizes: [4]}\n"
    "experiments:\n"
    "  - name: mine\n"
    "    program:\n"
    "      command: [python3, t.py, \"1\", '{batch_size}']\n";

TEST(StoredMatrixText, AMatrixWithoutHiddenValuesIsKeptVerbatim) {
  const std::string text = kHead + "      env: {OMP_NUM_THREADS: \"2\"}\n";
  EXPECT_EQ(stored(text), text);
  EXPECT_EQ(stored(kHead), kHead);
  const std::string csv = "branch,task,HF_TOKEN\nmain,x,hf_secret\n";  // never a program env
  EXPECT_EQ(stored_matrix_text(csv, "cytodl-train-csv", program_env_value_stored, "<x>"), csv);
}

TEST(StoredMatrixText, EverySpellingOfASecretIsReplacedAndTheMatrixReadsTheSame) {
  // The same two secrets as a flow map, plain, double- and single-quoted, folded and literal
  // block scalars, an anchor and its alias, and commented out.
  const std::string text =
      kHead +
      "      env:\n"
      "        AWS_SECRET_ACCESS_KEY: &key wJalrXUtnFEMIbPxRfiCYEXAMPLEKEY\n"
      "        HF_TOKEN: \"hf_Dq\\x41Secret\"\n"
      "        MY_PASSWORD: 'it''s-hidden'\n"
      "        LONG: >\n"
      "          hidden-folded-line-one\n"
      "          hidden-folded-line-two\n"
      "        BLOCK: |\n"
      "          hidden-literal\n"
      "        AGAIN: *key\n"
      "        OMP_NUM_THREADS: \"3\"\n"
      "        # OLD_TOKEN: hidden-in-a-comment\n"
      "  - name: other\n"
      "    program: {command: [python3, u.py], env: {HF_TOKEN: hidden-flow, NCCL_DEBUG: INFO}}\n";
  const std::string out = stored(text);
  for (const char* secret :
       {"wJalrXUtnFEMIbPxRfiCYEXAMPLEKEY", "hf_Dq", "Secret", "it's", "it''s", "hidden"}) {
    EXPECT_EQ(out.find(secret), std::string::npos) << secret << " in\n" << out;
  }
  const auto before = load_matrix_text("m.yaml", text);
  const auto after = load_matrix_text("m.yaml", out);
  ASSERT_EQ(before.cells.size(), after.cells.size());
  for (size_t i = 0; i < before.cells.size(); ++i) {
    const CellSpec& a = before.cells[i];
    const CellSpec& b = after.cells[i];
    EXPECT_EQ(a.program.command, b.program.command);  // "1" is still a string
    EXPECT_EQ(a.experiment, b.experiment);
    EXPECT_EQ(a.batch_size, b.batch_size);
    EXPECT_EQ(a.program.env.size(), b.program.env.size());
    for (const auto& [name, value] : a.program.env) {
      EXPECT_EQ(b.program.env.at(name),
                program_env_value_stored(name, value) ? value : results::kNotStoredValue)
          << name;
    }
  }
  EXPECT_EQ(after.cells[0].program.env.at("OMP_NUM_THREADS"), "3");
  EXPECT_EQ(after.cells[1].program.env.at("NCCL_DEBUG"), "INFO");
  EXPECT_EQ(out.rfind("# scalebench: ", 0), 0U) << out;  // says that it is not the file
}

}  // namespace
}  // namespace scalebench
