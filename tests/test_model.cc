#include "test_model.h"

#include <utility>

#include "base/check.h"

namespace pc::test {

MadeModel MakeTestModel(const ModelShape& shape, TensorType type, int vocab_size, bool copy) {
  MakeModelOptions mo;
  mo.shape = shape;
  mo.type = type;
  mo.vocab_size = vocab_size;
  mo.copy = copy;
  const std::string path = TempPath(shape.name + ".gguf");
  PC_CHECK(MakeModel(mo, path).ok());
  MadeModel m;
  m.model = std::move(*Model::Load(path, 1));
  m.tok = std::make_unique<Tokenizer>(std::move(*Tokenizer::FromGguf(m.model->gguf())));
  return m;
}

}  // namespace pc::test
